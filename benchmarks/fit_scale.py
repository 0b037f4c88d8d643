"""How long hwmodels takes to fit and rank large result sets, and how that grows with rows.

For each row count (default 10k, 100k, 1M) this writes synthetic CSVs with known
parameters and times, end to end in one process, reading the CSV (with the
bad-row scan) plus:

* scaling:      Scaling(model="auto") (Amdahl + USL, BIC) on devices/throughput rows
* comms:        AlphaBeta WLS fit on size/busbw rows
* convergence:  Convergence(family="auto") (3 families, AICc) + x_to_target (4000 MC draws)
* roofline:     Roofline envelope and lsq on flops/bytes/seconds/dtype/level rows
* cost:         read_workload_csv + CostModel ranking over 8 node types, all pricing modes,
                Pareto front, break-even and tornado

Target: every line at 1,000,000 rows under 10 s on the 2-core dev VM. Usage:
``python benchmarks/fit_scale.py [--rows 10000,100000,1000000]``. Timings are
wall clock (``time.perf_counter``), one run each, on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hwmodels.catalog import default_catalog  # noqa: E402
from hwmodels.comms import AlphaBeta  # noqa: E402
from hwmodels.convergence import Convergence  # noqa: E402
from hwmodels.cost import CostModel, read_workload_csv  # noqa: E402
from hwmodels.csvio import read_numeric  # noqa: E402
from hwmodels.roofline import Roofline  # noqa: E402
from hwmodels.scaling import Scaling  # noqa: E402


def write(path: Path, header: str, cols: list[np.ndarray]) -> None:
    import pandas as pd

    pd.DataFrame(dict(zip(header.split(","), cols))).to_csv(path, index=False)


def make(d: Path, n: int, rng) -> dict[str, Path]:
    out = {}
    N = rng.choice(np.array([1, 2, 4, 8, 16, 32, 64, 128, 256.0]), n)
    X = 100 * N / (1 + 0.03 * (N - 1) + 1e-4 * N * (N - 1)) * np.exp(rng.normal(0, 0.05, n))
    write(out.setdefault("scaling", d / "scaling.csv"), "devices,throughput", [N, X])
    S = np.exp(rng.uniform(np.log(1e3), np.log(1e9), n))
    t = (2e-5 + 1.75 * S / 1e11) * np.exp(rng.normal(0, 0.05, n))
    write(out.setdefault("comms", d / "comms.csv"), "size,busbw", [S, 1.75 * S / t / 1e9])
    x = np.exp(rng.uniform(np.log(1e2), np.log(1e5), n))
    write(out.setdefault("convergence", d / "conv.csv"), "x,loss", [x, 50 * x**-0.5 + 2 + rng.normal(0, 0.02, n)])
    F = np.exp(rng.uniform(np.log(1e6), np.log(1e10), n))
    Q = F / np.exp(rng.uniform(np.log(0.05), np.log(200), n))
    dt = rng.choice(np.array(["fp32", "bf16"]), n)
    P = np.where(dt == "fp32", 2e11, 4e11)
    write(out.setdefault("roofline", d / "roof.csv"), "flops,bytes,seconds,dtype,level",
          [F, Q, np.maximum(F / P, Q / 3e10) * np.exp(rng.normal(0, 0.05, n)), dt, np.full(n, "dram")])
    ids = np.array(default_catalog().ids())
    node = rng.choice(ids, n)
    base = {k: 10.0 ** (i % 4 + 1) for i, k in enumerate(ids)}
    thr = np.array([base[k] for k in node]) * np.exp(rng.normal(0, 0.05, n))
    write(out.setdefault("cost", d / "work.csv"), "node,samples_per_s", [node, thr])
    return out


def run(paths: dict[str, Path]) -> dict[str, float]:
    times = {}
    t0 = time.perf_counter()
    df, _ = read_numeric(paths["scaling"], ["devices", "throughput"])
    Scaling(model="auto", errors="multiplicative").fit(df["devices"].to_numpy(), df["throughput"].to_numpy())
    times["scaling"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    df, _ = read_numeric(paths["comms"], ["size", "busbw"])
    AlphaBeta().fit(df["size"].to_numpy(), busbw=df["busbw"].to_numpy() * 1e9, ranks=8)
    times["comms"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    df, _ = read_numeric(paths["convergence"], ["x", "loss"])
    Convergence().fit(df["x"].to_numpy(), df["loss"].to_numpy()).x_to_target(2.3)
    times["convergence"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import pandas as pd

    raw = pd.read_csv(paths["roofline"])
    Roofline().fit(raw)
    Roofline(method="lsq").fit(raw)
    times["roofline"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ws, _, _ = read_workload_csv(str(paths["cost"]))
    r = CostModel(catalog=default_catalog()).fit(ws, work=1e9)
    r.pareto(), r.break_even(), r.sensitivity()
    times["cost"] = time.perf_counter() - t0
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="10000,100000,1000000")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts = [int(float(x)) for x in args.rows.split(",")]
    rng = np.random.default_rng(args.seed)
    results = {}
    print(f"# hwmodels fit_scale, {os.cpu_count()} CPUs, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            d = Path(tmp) / str(n)
            d.mkdir()
            results[n] = run(make(d, n, rng))
    tasks = list(next(iter(results.values())))
    print(f"{'rows':>10} " + " ".join(f"{t:>12}" for t in tasks) + f" {'total':>10}")
    for n, tm in results.items():
        print(f"{n:>10} " + " ".join(f"{tm[t]:>11.2f}s" for t in tasks) + f" {sum(tm.values()):>9.2f}s")
    if len(counts) > 1:
        a, b = counts[0], counts[-1]
        print(f"growth {a}->{b} rows ({b / a:.0f}x): " + ", ".join(
            f"{t} {results[b][t] / results[a][t]:.1f}x" for t in tasks))
    worst = max(results[counts[-1]].values())
    print(f"slowest line at {counts[-1]} rows: {worst:.2f} s (target < 10 s): {'OK' if worst < 10 else 'MISSED'}")


if __name__ == "__main__":
    main()
