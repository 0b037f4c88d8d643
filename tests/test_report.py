"""Report builder on synthetic store records (no notebooks): sections, ranking labels, Pareto, offline HTML."""

from __future__ import annotations

import math
import re

from hweval import report
from hwcore.store import Record, Store

NODE = "cpu-epyc-zen4-2c"


def _seed(store: Store) -> None:
    recs = []
    # roofline: a compute-bound and two memory-bound kernels (flops, bytes, seconds known)
    for name, fl, by, s in (("gemm", 2 * 512**3, 3 * 4 * 512**2, 2 * 512**3 / 1e11),
                            ("stream_triad", 2e6, 24e6, 24e6 / 2e10), ("stream_copy", 0.0, 16e6, 16e6 / 2e10)):
        recs.append(Record(kind="kernel", name=name, params={"dtype": "fp32" if name == "gemm" else "fp64"},
                           metrics={"flops": fl, "bytes": by, "median_s": s}, plan="p"))
    # convergence: loss = 2 + 30 * samples^-0.5, sampled every 10 steps at batch 8; target 2.5 is reachable
    curve = [{"step": k, "tokens": k * 256, "seconds": 0.01 * k, "loss": 2 + 30 * (8 * k) ** -0.5}
             for k in range(10, 210, 10)]
    for sps in (800.0, 820.0, 790.0):
        recs.append(Record(kind="workload", name="transformer_lm", notebook="04_convergence", plan="p",
                           params={"batch_size": 8, "nprocs": 1, "target_loss": 2.5},
                           metrics={"loss_curve": curve, "samples_per_s": sps, "flops_per_step": 5e7,
                                    "target_loss": 2.5, "steps_to_target": None}))
    store.append(recs)


def test_build_report_offline_and_labelled(tmp_path, store_path):
    st = Store(store_path)
    _seed(st)
    out = report.build_report(store=st, plan="p", report_dir=tmp_path / "rep", candidates=[NODE, "h100-sxm"],
                              pricing=["on_demand"], measured_node=NODE)
    text = out.html.read_text()
    assert not re.search(r"<script[^>]+src\s*=\s*['\"]?https?:", text, re.I)
    rows = out.ranking
    assert set(rows["basis"]) == {"measured", "projected"}
    assert set(rows.loc[rows["basis"] == "measured", "node"]) == {NODE}
    # cost = time x price, every interval brackets its point
    for r in rows.to_dict("records"):
        assert math.isclose(r["cost_usd"], r["time_to_target_s"] / 3600 * r["usd_per_hour"], rel_tol=1e-9)
        assert r["lo"] <= r["cost_usd"] <= r["hi"]
    # a row is on the Pareto front iff nothing is both faster and cheaper
    recs = rows.to_dict("records")
    for r in recs:
        dominated = any(o["time_to_target_s"] <= r["time_to_target_s"] and o["cost_usd"] <= r["cost_usd"]
                        and (o["time_to_target_s"] < r["time_to_target_s"] or o["cost_usd"] < r["cost_usd"])
                        for o in recs if o is not r)
        assert r["pareto"] == (not dominated)
    assert out.recommendation.startswith("Cheapest way to reach the target: ")
    assert {"roofline", "loss", "cost", "pareto", "sensitivity"} <= set(out.charts)
    assert len(st.records(kind="report")) == 1


def test_convergence_section_predicts_known_curve(store_path):
    st = Store(store_path)
    _seed(st)
    rows = report._kernel_records(st, "p", "workload")
    conv = report.convergence_section(rows, level=0.9)
    # loss(samples) = 2 + 30 / sqrt(samples) = 2.5  ->  samples = 3600  ->  step 450 at batch 8
    assert conv["ok"] and conv["fit"]["reachable"]
    assert abs(conv["fit"]["steps_to_target"] - 450) / 450 < 0.05
    assert conv["fit"]["seconds_per_step"] == 8 / 800.0


def test_roofline_section_recovers_ceilings(store_path):
    st = Store(store_path)
    _seed(st)
    sec = report.roofline_section(report._kernel_records(st, "p", "kernel"), node=NODE)
    assert sec["ok"]
    assert math.isclose(sec["fit"]["peak_flops_per_s"], 1e11, rel_tol=1e-6)
    assert math.isclose(sec["fit"]["peak_bytes_per_s"], 2e10, rel_tol=1e-6)


def test_empty_store_report_says_so(tmp_path, store_path):
    out = report.build_report(store=Store(store_path), plan="nothing", report_dir=tmp_path / "rep")
    assert out.ranking.empty and out.recommendation.startswith("No recommendation")
    assert "run 01_node_characterization" in out.html.read_text()
