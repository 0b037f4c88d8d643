"""Speed of the layout search (issue 11, part 7): one 175B job on 10,000 accelerators, every catalog node type.

Target: under 2 s on this 2-core machine (a benchmark, not a timed test).

    .venv/bin/python benchmarks/predict_speed.py [--accelerators 10000] [--model gpt3-175b] [--repeat 3]

Each repeat starts from cold caches: every ``functools.lru_cache`` of the
predictor's modules is cleared (per-layer costs, GEMM efficiencies, collective
curve fits, the calibration and validation files read), so a repeat includes
reading the data, fitting every node's collective curves, calibrating every
node type and pricing every layout; only the imports are warm. A fresh process
(imports included, what one ``hweval predict`` pays) is timed apart with
``--fresh-process``.
"""

from __future__ import annotations

import argparse
import pkgutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hwmodels  # noqa: E402
from hwmodels.catalog import default_catalog  # noqa: E402
from hwmodels.predict.calibration import calibrate  # noqa: E402
from hwmodels.predict.search import search  # noqa: E402
from hwmodels.predict.spec import parse_spec  # noqa: E402


def clear_caches() -> int:
    """Clear every lru_cache of the hwmodels modules imported so far; the number cleared."""
    n = 0
    for info in pkgutil.walk_packages(hwmodels.__path__, "hwmodels."):
        mod = sys.modules.get(info.name)
        for obj in vars(mod).values() if mod else ():
            if callable(getattr(obj, "cache_clear", None)) and getattr(obj, "__module__", "") == info.name:
                obj.cache_clear()
                n += 1
    return n


FRESH = ("import sys, time; t0 = time.perf_counter(); sys.path.insert(0, {root!r}); "
         "from hwmodels.catalog import default_catalog; from hwmodels.predict.search import search_all; "
         "from hwmodels.predict.spec import parse_spec; "
         "search_all(parse_spec({model!r}), list(default_catalog()), accelerators={n}); "
         "print(time.perf_counter() - t0)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--accelerators", type=int, default=10_000)
    ap.add_argument("--model", default="gpt3-175b")
    ap.add_argument("--global-batch", type=int, default=0, help="0 = the default (~4M tokens)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fresh-process", type=int, default=0, metavar="K",
                    help="also time K fresh processes (imports included)")
    args = ap.parse_args(argv)
    spec = parse_spec(args.model)
    catalog = list(default_catalog())
    times = []
    res = {}
    cleared = 0
    cal_times, search_times = [], []
    for _ in range(args.repeat):
        cleared = clear_caches()
        t0 = time.perf_counter()
        cals = {node.id: calibrate(node) for node in catalog}
        t1 = time.perf_counter()
        res = {node.id: search(spec, cals[node.id], hardware=node.id, accelerators=args.accelerators,
                               global_batch=args.global_batch or None) for node in catalog}
        t2 = time.perf_counter()
        cal_times.append(t1 - t0)
        search_times.append(t2 - t1)
        times.append(t2 - t0)
    considered = sum(r.considered for r in res.values())
    print(f"{args.model} on {args.accelerators} accelerators x {len(catalog)} node types: "
          f"{considered} layouts enumerated per run")
    print(f"{'node':18s} {'considered':>10s} {'fitting':>8s} {'tok/s/acc':>10s} {'MFU':>6s}  best layout")
    for nid, r in res.items():
        if r.best is None:
            print(f"{nid:18s} {r.considered:10d} {r.fitting:8d} {'-':>10s} {'-':>6s}  nothing fits")
            continue
        b = r.best
        lay = b.layout
        print(f"{nid:18s} {r.considered:10d} {r.fitting:8d} {b.tokens_per_s_per_accelerator:10.1f} {b.mfu:6.3f}  "
              f"dp{lay.dp} tp{lay.tp} pp{lay.pp} v{lay.interleave} mb{lay.micro_batch} {lay.sharding}"
              f"{'(hybrid)' if lay.hybrid_shard else ''} {lay.recompute}")
    print(f"wall per run, {cleared} caches cleared before each (s): " + ", ".join(
        f"{t:.2f} (calibrating {c:.2f} + searching {s_:.2f})" for t, c, s_ in zip(times, cal_times, search_times))
          + f"; best {min(times):.2f} s, search alone {min(search_times):.2f} s (target < 2 s)")
    if args.fresh_process:
        code = FRESH.format(root=str(Path(__file__).resolve().parents[1]), model=args.model, n=args.accelerators)
        fresh = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                      check=True).stdout) for _ in range(args.fresh_process)]
        print("fresh process, imports included (s): " + ", ".join(f"{t:.2f}" for t in fresh)
              + f"; best {min(fresh):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
