"""Validate hwmodels.comms on public nccl-tests curves (data/reference/nccl_tests).

For every curve in ``sources.toml`` (all_reduce and all_gather today; any
collective ``hwmodels.comms`` knows): fit the ramp model (``CommsModel``) and,
as the baseline, the two-parameter alpha-beta (``AlphaBeta``) on the sizes
32 KiB-256 MiB only (out-of-place and in-place times both, as replicate
measurements), then predict busbw at every published size >= 1 GiB and compare
with the published out-of-place busbw: relative error and whether the 90%
prediction interval covers it. Also: the link-only model from the catalog
node's link figures (no fit; skipped for a curve whose node the catalog lacks),
a summary per collective, and two projections through the catalog's links:

* cross-rank: fit on the 8-GPU DGX H100 all_reduce curve, predict the 16-GPU p5
  all_reduce curve (``CommsResult.with_link``);
* cross-collective: fit on an all_reduce curve, predict the all_gather curve of
  the same system in bus bytes (what the step-time predictor does where a node
  has only an all_reduce curve: ``hwmodels.predict.collectives``).

Run: ``.venv/bin/python benchmarks/comms_validation.py`` (a few seconds).
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hweval.importers.nccl_tests import parse_file  # noqa: E402
from hwmodels.catalog import load_catalog  # noqa: E402
from hwmodels.comms import AlphaBeta, CommsModel, LinkModel, busbw_factor  # noqa: E402

REF = ROOT / "data" / "reference" / "nccl_tests"
FIT_MIN, FIT_MAX, TEST_MIN = int(os.environ.get("FIT_MIN", 32 * 2**10)), 256 * 2**20, 2**30
LEVEL = 0.90
USE_CEILING = os.environ.get("CEILING", "1") != "0"
#: (fit on, predict) pairs of the same system, all_reduce -> all_gather in bus bytes
CROSS_COLLECTIVE = (("gcp_a3mega_2node_16gpu_all_reduce", "mg_cafe_a3mega_2node_16gpu_all_gather"),)


def load(entry: dict):
    """(log or None, sizes, out-of-place times, in-place times, busbw B/s).

    A CSV (a published table, not raw stdout) has one value per size: its ``time_us`` column where it has one
    (busbw is printed to two decimals, too coarse at small sizes), else the time implied by ``busbw_GBps``.
    """
    if entry.get("format") == "csv":
        import pandas as pd

        df = pd.read_csv(REF / entry["file"], comment="#")
        s = df["size_bytes"].to_numpy(dtype=float)
        b = df["busbw_GBps"].to_numpy(dtype=float) * 1e9
        f = busbw_factor(entry["collective"], entry["ranks"])
        t = df["time_us"].to_numpy(dtype=float) * 1e-6 if "time_us" in df else f * s / b
        return None, s, t, t, b
    log = parse_file(str(REF / entry["file"]), collective=entry["collective"], ranks=int(entry["ranks"]))[0]
    s, t, b = log.arrays()
    _, ti, _ = log.arrays(inplace=True)
    keep = s > 0  # all_gather/reduce_scatter logs start with 0-byte rows
    return log, s[keep], t[keep], ti[keep], b[keep]


def link_for(entry: dict, cat):
    """The catalog node's link model, with the system's own NIC figure where sources.toml states one."""
    if not entry.get("node"):
        return None
    over = {}
    if "inter_node_Gbps" in entry:  # e.g. A3 Mega: 8 x 200 Gbps, not the catalog h100-sxm (p5) 3200 Gbps
        node = cat.get(entry["node"])
        over["inter_bytes_per_s"] = entry["inter_node_Gbps"] * 1e9 / 8 / node.accelerators_per_node
        over["source"] = f"catalog {entry['node']} [links], NICs {entry['inter_node_Gbps']} Gb/s per node (sources.toml)"
    return LinkModel.from_node(cat.get(entry["node"]), **over)


def fit_ramp(entry: dict, s, t, ti, *, link=None, ceiling=None):
    m = (s >= FIT_MIN) & (s <= FIT_MAX) & (t > 0) & (ti > 0)
    return CommsModel(collective=entry["collective"], max_busbw=ceiling).fit(
        np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=entry["ranks"], link=link)


def _row(si, truth, p, i):
    err = p["busbw"][i] / truth - 1
    cov = bool(p["busbw_lo"][i] <= truth <= p["busbw_hi"][i])
    return err, cov, (f"  {si / 2**30:4.0f}Gi published {truth / 1e9:6.1f} projected {p['busbw'][i] / 1e9:6.1f} "
                      f"[{p['busbw_lo'][i] / 1e9:.1f}, {p['busbw_hi'][i] / 1e9:.1f}] {err:+.1%} "
                      f"{'covered' if cov else 'NOT covered'}")


def main() -> int:
    sources = tomllib.loads((REF / "sources.toml").read_text())
    cat = load_catalog()
    rows, summary = [], []
    print(f"fit on {FIT_MIN // 1024} KiB-{FIT_MAX // 2**20} MiB, predict >= 1 GiB; {LEVEL:.0%} prediction intervals\n")
    fits = {}
    for key, e in sources.items():
        log, s, t, ti, b = load(e)
        link = link_for(e, cat)
        # the catalog's line-rate ceiling (flat ring across domains), off with CEILING=0
        ceiling = link.network_ceiling(e["collective"], e["ranks"]) if link and USE_CEILING else None
        res = fit_ramp(e, s, t, ti, ceiling=ceiling)
        fits[key] = res
        m = (s >= FIT_MIN) & (s <= FIT_MAX)
        ab = AlphaBeta(collective=e["collective"]).fit(np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=e["ranks"])
        h = s >= TEST_MIN
        p = res.predict(s[h], alpha=1 - LEVEL)
        p_ab = ab.predict_busbw(s[h])
        p_link = link.predict_busbw(e["collective"], s[h], e["ranks"]) if link else np.full(h.sum(), np.nan)
        sw = res.meta["switches_at_bytes"]
        print(f"{key} [{e['collective']}, {e['ranks']} ranks]: {e['system']}")
        print(f"  ramp fit: alpha {res.alpha_s * 1e6:.3g} us, fill {res.fill_s * 1e6:.3g} us, B_inf "
              f"{res.busbw_inf / 1e9:.4g} GB/s, residual sd(ln t) {np.sqrt(res.s2_pred):.3f}, regimes "
              f"{len(res.regimes)}{' (switch at ' + ', '.join(f'{x / 2**20:g} MiB' for x in sw) + ')' if sw else ''}"
              f"{'; at bound: ' + ', '.join(res.meta['at_bound']) if res.meta['at_bound'] else ''}"
              f"{f'; B_inf ceiling {ceiling / 1e9:.0f} GB/s (line rate)' if ceiling else ''}")
        print(f"  {'size':>6} {'published':>9} {'ramp':>7} {'90% PI':>17} {'err':>7} {'cov':>4} | {'alpha-beta':>10} "
              f"{'err':>7} | {'link':>6} {'err':>7}")
        for i, si in enumerate(s[h]):
            truth = b[h][i]
            err = p["busbw"][i] / truth - 1
            cov = p["busbw_lo"][i] <= truth <= p["busbw_hi"][i]
            e_ab = p_ab[i] / truth - 1
            e_l = p_link[i] / truth - 1
            rows.append((key, si, err, cov, e_ab, e_l, e["collective"]))
            print(f"  {si / 2**30:4.0f}Gi {truth / 1e9:9.1f} {p['busbw'][i] / 1e9:7.1f} "
                  f"[{p['busbw_lo'][i] / 1e9:6.1f},{p['busbw_hi'][i] / 1e9:7.1f}] {err:+7.1%} {'yes' if cov else 'NO':>4} | "
                  f"{p_ab[i] / 1e9:10.1f} {e_ab:+7.1%} | {p_link[i] / 1e9:6.1f} {e_l:+7.1%}")
        mine = [r for r in rows if r[0] == key]
        summary.append((key, e["collective"], max(abs(r[2]) for r in mine), sum(r[3] for r in mine), len(mine),
                        max(abs(r[4]) for r in mine), max(abs(r[5]) for r in mine) if link else float("nan")))
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
            print(_row(si, b[h][i], p, i)[2])
        print()
    # cross-collective: an all_reduce fit prices all_gather in bus bytes (same ranks, same system)
    for src, dst in CROSS_COLLECTIVE:
        if src not in fits or dst not in sources:
            continue
        e = sources[dst]
        _, s, _, _, b = load(e)
        h = s >= TEST_MIN
        ar = fits[src]
        f_ar, f_ag = busbw_factor(ar.collective, ar.ranks), busbw_factor(e["collective"], e["ranks"])
        p_ar = ar.predict(s[h] * f_ag / f_ar, alpha=1 - LEVEL)  # the all_reduce size with the same bus bytes
        link = link_for(e, cat)
        ratio = link.busbw_inf(e["collective"], e["ranks"]) / link.busbw_inf(ar.collective, ar.ranks)
        for label, r in (("equal busbw", 1.0), (f"x link-model ratio {ratio:.3f} ({e['node']})", ratio)):
            p = {k: p_ar[k] * r for k in ("busbw", "busbw_lo", "busbw_hi")}
            print(f"cross-collective: fit {src} ({ar.collective}) -> predict {dst} ({e['collective']}), {label}")
            for i, si in enumerate(s[h]):
                print(_row(si, b[h][i], p, i)[2])
        print()
    print(f"{'curve':40} {'collective':>10} {'max |err| ramp':>14} {'covered':>8} {'max |err| a-b':>13} "
          f"{'max |err| link':>14}")
    for key, coll, me, nc, n, mab, ml in summary:
        print(f"{key:40} {coll:>10} {me:14.1%} {nc:>4}/{n:<3} {mab:13.1%} {ml:14.1%}")
    print()
    for coll in dict.fromkeys(r[6] for r in rows):
        rr = [r for r in rows if r[6] == coll]
        print(f"{coll}: {len({r[0] for r in rr})} curves, {sum(abs(r[2]) <= 0.10 for r in rr)}/{len(rr)} held-out "
              f"points within 10%, {sum(r[3] for r in rr)}/{len(rr)} covered by the {LEVEL:.0%} PI")
    allerr = [abs(r[2]) for r in rows]
    print(f"all held-out points: {sum(x <= 0.10 for x in allerr)}/{len(allerr)} within 10%, "
          f"{sum(r[3] for r in rows)}/{len(rows)} covered by the {LEVEL:.0%} PI")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
