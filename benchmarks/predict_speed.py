"""Speed of the layout search (issue 11, part 7): one 175B job on 10,000 accelerators, every catalog node type.

Target: under 2 s on this 2-core machine (a benchmark, not a timed test).

    .venv/bin/python benchmarks/predict_speed.py [--accelerators 10000] [--model gpt3-175b] [--repeat 3]

Each repeat starts from cold caches (the per-layer cost caches are cleared),
so the figure includes calibrating every node type and pricing every layout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hwmodels.catalog import default_catalog  # noqa: E402
from hwmodels.predict import predictor as P  # noqa: E402
from hwmodels.predict.calibration import _gemm_eff  # noqa: E402
from hwmodels.predict.search import search_all  # noqa: E402
from hwmodels.predict.spec import parse_spec  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--accelerators", type=int, default=10_000)
    ap.add_argument("--model", default="gpt3-175b")
    ap.add_argument("--global-batch", type=int, default=0, help="0 = the default (~4M tokens)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    spec = parse_spec(args.model)
    catalog = list(default_catalog())
    times = []
    res = {}
    for _ in range(args.repeat):
        P._layer_cost.cache_clear()
        P._head_cost.cache_clear()
        _gemm_eff.cache_clear()
        t0 = time.perf_counter()
        res = search_all(spec, catalog, accelerators=args.accelerators, global_batch=args.global_batch or None)
        times.append(time.perf_counter() - t0)
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
    print("wall per run (s): " + ", ".join(f"{t:.2f}" for t in times)
          + f"; best {min(times):.2f} s (target < 2 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
