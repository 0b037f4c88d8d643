"""Validate hwmodels.comms on public nccl-tests curves (data/reference/nccl_tests).

For every curve: fit the ramp model (``CommsModel``) and, as the baseline,
the two-parameter alpha-beta (``AlphaBeta``) on the sizes 32 KiB-256 MiB
only (out-of-place and in-place times both, as replicate measurements), then
predict busbw at every published size >= 1 GiB and compare with the
published out-of-place busbw: relative error and whether the 90% prediction
interval covers it. Also: the link-only model from the catalog node's link
figures (no fit), and a cross-rank projection (fit on the 8-GPU DGX H100 curve,
predict the 16-GPU p5 curve through the catalog's h100-sxm links).

Run: ``.venv/bin/python benchmarks/comms_validation.py`` (a few seconds).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hweval.importers.nccl_tests import parse_file  # noqa: E402
from hwmodels.catalog import load_catalog  # noqa: E402
from hwmodels.comms import AlphaBeta, CommsModel, LinkModel  # noqa: E402

REF = ROOT / "data" / "reference" / "nccl_tests"
FIT_MIN, FIT_MAX, TEST_MIN = int(__import__("os").environ.get("FIT_MIN", 32 * 2**10)), 256 * 2**20, 2**30
LEVEL = 0.90


def load(entry: dict):
    """(log or None, sizes, out-of-place times, in-place times, busbw B/s); a CSV has one busbw per size."""
    if entry.get("format") == "csv":
        import pandas as pd

        from hwmodels.comms import busbw_factor

        df = pd.read_csv(REF / entry["file"], comment="#")
        s = df["size_bytes"].to_numpy(dtype=float)
        b = df["busbw_GBps"].to_numpy(dtype=float) * 1e9
        t = busbw_factor(entry["collective"], entry["ranks"]) * s / b
        return None, s, t, t, b
    log = parse_file(str(REF / entry["file"]), collective=entry["collective"], ranks=int(entry["ranks"]))[0]
    s, t, b = log.arrays()
    _, ti, _ = log.arrays(inplace=True)
    return log, s, t, ti, b


def fit_ramp(entry: dict, s, t, ti, *, link=None):
    m = (s >= FIT_MIN) & (s <= FIT_MAX) & (t > 0) & (ti > 0)
    return CommsModel(collective=entry["collective"]).fit(np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]],
                                                          ranks=entry["ranks"], link=link)


def main() -> int:
    sources = tomllib.loads((REF / "sources.toml").read_text())
    cat = load_catalog()
    rows, summary = [], []
    print(f"fit on {FIT_MIN // 1024} KiB-{FIT_MAX // 2**20} MiB, predict >= 1 GiB; {LEVEL:.0%} prediction intervals\n")
    fits = {}
    for key, e in sources.items():
        log, s, t, ti, b = load(e)
        res = fit_ramp(e, s, t, ti)
        fits[key] = res
        m = (s >= FIT_MIN) & (s <= FIT_MAX)
        ab = AlphaBeta(collective=e["collective"]).fit(np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=e["ranks"])
        link = LinkModel.from_node(cat.get(e["node"]))
        h = s >= TEST_MIN
        p = res.predict(s[h], alpha=1 - LEVEL)
        p_ab = ab.predict_busbw(s[h])
        p_link = link.predict_busbw(e["collective"], s[h], e["ranks"])
        sw = res.meta["switches_at_bytes"]
        print(f"{key}: {e['system']}")
        print(f"  ramp fit: alpha {res.alpha_s * 1e6:.3g} us, fill {res.fill_s * 1e6:.3g} us, B_inf "
              f"{res.busbw_inf / 1e9:.4g} GB/s, residual sd(ln t) {np.sqrt(res.s2_pred):.3f}, regimes "
              f"{len(res.regimes)}{' (switch at ' + ', '.join(f'{x / 2**20:g} MiB' for x in sw) + ')' if sw else ''}")
        print(f"  {'size':>6} {'published':>9} {'ramp':>7} {'90% PI':>17} {'err':>7} {'cov':>4} | {'alpha-beta':>10} "
              f"{'err':>7} | {'link':>6} {'err':>7}")
        for i, si in enumerate(s[h]):
            truth = b[h][i]
            err = p["busbw"][i] / truth - 1
            cov = p["busbw_lo"][i] <= truth <= p["busbw_hi"][i]
            e_ab = p_ab[i] / truth - 1
            e_l = p_link[i] / truth - 1
            rows.append((key, si, err, cov, e_ab, e_l))
            print(f"  {si / 2**30:4.0f}Gi {truth / 1e9:9.1f} {p['busbw'][i] / 1e9:7.1f} "
                  f"[{p['busbw_lo'][i] / 1e9:6.1f},{p['busbw_hi'][i] / 1e9:7.1f}] {err:+7.1%} {'yes' if cov else 'NO':>4} | "
                  f"{p_ab[i] / 1e9:10.1f} {e_ab:+7.1%} | {p_link[i] / 1e9:6.1f} {e_l:+7.1%}")
        errs = [r[2] for r in rows if r[0] == key]
        summary.append((key, max(abs(x) for x in errs), sum(r[3] for r in rows if r[0] == key), len(errs),
                        max(abs(r[4]) for r in rows if r[0] == key), max(abs(r[5]) for r in rows if r[0] == key)))
        print()
    # cross-rank: DGX H100 (8 ranks) -> 2 x p5 (16 ranks) through the catalog's h100-sxm links
    src, dst = "dgx_h100_8gpu_all_reduce", "aws_p5_2node_16gpu_all_reduce"
    if src in fits and dst in sources:
        e = sources[dst]
        _, s, _, _, b = load(e)
        proj = fits[src].with_link(cat.get("h100-sxm"))
        h = s >= TEST_MIN
        p = proj.predict(s[h], ranks=e["ranks"], alpha=1 - LEVEL)
        print(f"cross-rank: fit {src} (8 ranks) -> predict {dst} (16 ranks) via catalog h100-sxm links")
        for i, si in enumerate(s[h]):
            truth = b[h][i]
            cov = p["busbw_lo"][i] <= truth <= p["busbw_hi"][i]
            print(f"  {si / 2**30:4.0f}Gi published {truth / 1e9:6.1f} projected {p['busbw'][i] / 1e9:6.1f} "
                  f"[{p['busbw_lo'][i] / 1e9:.1f}, {p['busbw_hi'][i] / 1e9:.1f}] {p['busbw'][i] / truth - 1:+.1%} "
                  f"{'covered' if cov else 'NOT covered'}")
        print()
    print(f"{'curve':36} {'max |err| ramp':>14} {'covered':>8} {'max |err| a-b':>13} {'max |err| link':>14}")
    for key, me, nc, n, mab, ml in summary:
        print(f"{key:36} {me:14.1%} {nc:>4}/{n:<3} {mab:13.1%} {ml:14.1%}")
    allerr = [abs(r[2]) for r in rows]
    print(f"\nall held-out points: {sum(x <= 0.10 for x in allerr)}/{len(allerr)} within 10%, "
          f"{sum(r[3] for r in rows)}/{len(rows)} covered by the {LEVEL:.0%} PI")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
