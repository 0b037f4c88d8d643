"""Do the harness's default budgets hold under load? Suite GEMM vs a bare ``a @ b`` loop.

Issue 15.7: with fixed tiny budgets (5 samples after 1 warm-up) the suite read
0.72 of a bare loop's rate in 2 of 3 rounds on this loaded machine. The
harness now warms up until the rate is stable and samples until the median's
95% CI is within 2% (or a time cap). This script measures, side by side in one
run and alternating in rounds (so load drifts hit both alike):

* suite: ``kernels.registry.run("gemm", ...)`` with the DEFAULT budgets, as
  ``hweval bench gemm --set m=N --set n=N --set k=N --set dtype=D`` runs it;
* bare: ``torch.matmul(a, b)`` on the same shape and dtype, 5 warm-up calls then
  ``--bare-samples`` (default 40) timed calls, median.

Ratio = suite rate / bare rate per round; the figure is the median over rounds
(target >= 0.97 at 256^3, 1024^3 and 4096^3, fp32 and bf16). Prints the table
and each suite measurement's stop reason. A measurement, not a test: exit 0
whatever the ratios.

Usage: ``.venv/bin/python benchmarks/measurement_defaults.py [--rounds 3] [--sizes 256,1024,4096]
[--dtypes fp32,bf16] [--bare-samples 40] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from hwmodels import dtypes  # noqa: E402
from kernels import registry as R  # noqa: E402

TARGET = 0.97
DTYPES = {name: getattr(torch, dtypes.get(name).torch) for name in ("fp32", "bf16", "fp16")}


def bare(n: int, dtype: str, samples: int, warmup: int = 5) -> float:
    """Median seconds of ``a @ b`` (n x n x n) over ``samples`` calls after ``warmup`` calls."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(DTYPES[dtype])
    b = torch.randn(n, n, generator=g).to(DTYPES[dtype])
    for _ in range(warmup):
        a @ b
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def suite(n: int, dtype: str) -> tuple[float, str, int, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = R.run("gemm", {"m": n, "n": n, "k": n, "dtype": dtype}, record=False)
    m = res.measurement
    return m.median_s, m.stop_reason, m.n, m.warmup_n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="256,1024,4096")
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--bare-samples", type=int, default=40)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    dtypes = args.dtypes.split(",")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load average "
          f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = []
    for n in sizes:
        for dt in dtypes:
            ratios, stops = [], []
            for r in range(args.rounds):
                # alternate which side goes first so a load change favours neither
                if r % 2 == 0:
                    s_med, stop, ns, nw = suite(n, dt)
                    b_med = bare(n, dt, args.bare_samples)
                else:
                    b_med = bare(n, dt, args.bare_samples)
                    s_med, stop, ns, nw = suite(n, dt)
                ratios.append(b_med / s_med)  # rate ratio suite/bare = time bare / time suite
                stops.append(f"{stop}({ns} samples, {nw} warm-up)")
            med = statistics.median(ratios)
            flops = 2.0 * n**3
            row = {"n": n, "dtype": dt, "ratio_median": med, "ratios": ratios, "suite_stops": stops,
                   "bare_gflops_last": flops / b_med / 1e9, "suite_gflops_last": flops / s_med / 1e9}
            rows.append(row)
            flag = "ok" if med >= TARGET else "MISS"
            print(f"{n:>5}^3 {dt:<5} suite/bare median {med:.3f} [{flag}]  rounds "
                  f"{', '.join(f'{x:.3f}' for x in ratios)}  suite stops: {'; '.join(stops)}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
