"""Report rendering on synthetic store records (no notebooks): offline HTML, human units, one caption per chart."""

from __future__ import annotations

import math
import re

import pytest

from hweval import analysis, report
from hwcore.records import KernelRecord, WorkloadRecord
from hwcore.store import Store

NODE = "cpu-epyc-zen4-2c"
JOB = {"model": "llama2-7b", "tokens": 1e12, "global_batch": 1024, "accelerators": [256, 512],
       "deadline_days": 30, "pricing": ["on_demand", "spot", "on_prem"]}
CANDIDATES = ["h100-sxm", "mi300x", "gaudi3"]
RUN = "20261201T000000-seed"  # one run: the analysis keeps each notebook's latest run


def seed(store: Store) -> None:
    recs = []
    # roofline: a compute-bound GEMM (fp32) and STREAM at a cache-resident and a DRAM working set
    for name, dt, fl, by, s in (("gemm", "fp32", 2 * 512**3, 3 * 4 * 512**2, 2 * 512**3 / 1e11),
                                ("stream_triad", "fp64", 2e6, 24e6, 24e6 / 8e10),
                                ("stream_triad", "fp64", 2e8, 2.4e9, 2.4e9 / 2e10),
                                ("stream_copy", "fp64", 0.0, 1.6e9, 1.6e9 / 2e10)):
        recs.append(KernelRecord(kernel=name, params={"dtype": dt, "n": int(by // 24)},
                                 metrics={"flops": fl, "bytes": by, "median_s": s, "flops_per_s": fl / s,
                                          "bytes_per_s": by / s, "noise_ratio": 0.04,
                                          "noise_warning": name == "stream_copy"}, plan="p", run_id=RUN).to_record())
    # convergence: loss = 2 + 30 * samples^-0.5, every 10 steps at batch 8; target 2.5 is reachable
    curve = [{"step": k, "tokens": k * 512, "seconds": 0.01 * k, "loss": 2 + 30 * (8 * k) ** -0.5}
             for k in range(10, 210, 10)]
    for sps in (800.0, 820.0, 790.0):
        recs.append(WorkloadRecord(workload="transformer_lm", notebook="04_convergence", plan="p", run_id=RUN,
                                   params={"batch_size": 8, "nprocs": 1, "target_loss": 2.5, "layers": 2, "width": 64,
                                           "heads": 4, "seq_len": 64, "vocab": 256, "precision": "fp32"},
                                   metrics={"loss_curve": curve, "samples_per_s": sps, "flops_per_step": 5e7,
                                            "target_loss": 2.5, "steps_to_target": None, "mfu": 0.12}).to_record())
    store.append(recs)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("rep")
    st = Store(d / "store")
    seed(st)
    out = report.build_report(store=st, plan="p", report_dir=d / "rep", job=JOB, candidates=CANDIDATES,
                              measured_node=NODE, today="2025-12-01")
    return st, out


def test_report_offline_human_units_and_captions(built):
    st, out = built
    text = out.html.read_text()
    assert not re.search(r"<script[^>]+src\s*=\s*['\"]?https?:", text, re.I)
    assert "90% intervals throughout" in text
    body = re.sub(r"<script>.*?</script>", "", text, flags=re.S)
    # no scientific notation for money or time anywhere a reader sees
    assert not re.search(r"\$\s?\d+(\.\d+)?e[+-]?\d", body)
    assert not re.search(r"\d\.\d+e[+-]\d+ (s|h|days|USD)", body)
    # one caption per chart, each different
    caps = re.findall(r"<p class='caption'>(.*?)</p>", body)
    assert len(caps) == len(set(caps)) == len(out.charts)
    assert {"pareto", "cost", "interval", "roofline", "loss"} <= set(out.charts)
    assert len(st.records(kind="report")) == 1


def test_recommendation_sentence(built):
    _, out = built
    rec = out.recommendation
    assert rec.startswith("Train llama2-7b on 1T tokens on ")
    assert re.search(r"\d+ x (h100-sxm|mi300x|gaudi3) ", rec)
    assert re.search(r"\d[\d,.]* (days|h)\b", rec) and re.search(r"\$[\d,.]+[kMB]?", rec)
    assert "90%:" in rec and "as of" in rec


def test_unavailable_modes_are_said_and_prices_dated(built):
    _, out = built
    an = out.analysis
    # gaudi3 has no on-demand or spot price; mi300x no spot: said, not dropped
    said = {(u.node, u.pricing) for u in an.unavailable}
    assert {("gaudi3", "on_demand"), ("gaudi3", "spot"), ("mi300x", "spot")} <= said
    text = out.html.read_text()
    assert "Asked for but not available" in text and "older than 12 months" in text
    for o in an.options:
        assert o.price.provider and o.price.as_of
        assert o.cost_lo_usd < o.cost_usd < o.cost_hi_usd
        billed = max(o.accelerator_hours, o.price.min_billed_hours * o.accelerators)
        assert math.isclose(o.cost_usd, billed * o.price.usd_per_accelerator_hour, rel_tol=1e-12)


def test_roofline_same_dtype_datasheet_and_cache_label(built):
    _, out = built
    sec = out.analysis.sections["roofline"]
    assert sec["ok"]
    assert set(sec["fit"]["datasheet"]) == {"fp32"}  # fp32 measured -> fp32 datasheet, nothing else
    names = {c["ceiling"] for c in sec["ceilings"]}
    assert "cache-resident bandwidth (measured)" in names and any("datasheet" in n and "fp32" in n for n in names)
    kinds = {p["memory"] for p in sec["points"]}
    assert kinds == {"cache-resident", "DRAM"}
    # the DRAM fit ignores the cache-resident point (8e10 B/s) and recovers 2e10 B/s
    assert math.isclose(sec["fit"]["peak_bytes_per_s"], 2e10, rel_tol=1e-6)


def test_noise_warnings_reach_report(built):
    _, out = built
    assert any("stream_copy" in w for w in out.analysis.measurements.noise_warnings)
    assert "noisy measurement: stream_copy" in out.html.read_text()


def test_convergence_section_predicts_known_curve(built):
    st, _ = built
    m = analysis.load_measurements(st, "p")
    conv = analysis.convergence_section(m.workloads, level=0.9)
    # loss(samples) = 2 + 30 / sqrt(samples) = 2.5  ->  samples = 3600  ->  step 450 at batch 8
    assert conv["ok"] and conv["fit"]["reachable"]
    assert abs(conv["fit"]["steps_to_target"] - 450) / 450 < 0.05


def test_scaling_not_identified_says_not_enough_data():
    rows = [{"workload": "w", "status": "ok", "params": {"nprocs": n}, "samples_per_s": v}
            for n, v in ((1, 100.0), (1, 101.0), (2, 180.0), (2, 182.0))]
    sec = analysis.scaling_section(rows)
    assert not sec["ok"] and "not enough data" in sec["summary"] and sec["curve"] == []


def test_empty_store_without_job_says_so(tmp_path, store_path):
    out = report.build_report(store=Store(store_path), plan="nothing", report_dir=tmp_path / "rep")
    assert out.analysis.options == () and out.recommendation.startswith("No recommendation")
    assert "run 01_node_characterization" in out.html.read_text()


def test_fmt_helpers_never_scientific():
    assert analysis.fmt_usd(1_620_000) == "$1.62M"
    assert analysis.fmt_usd(15_081.7) == "$15.1k"
    assert analysis.fmt_usd(2_345) == "$2,345"
    assert analysis.fmt_duration(9.8 * 86400) == "9.8 days"
    assert analysis.fmt_duration(5400, ("h", 3600.0)) == "1.5 h"
    assert analysis.fmt_rate(1.23e12, "FLOP/s") == "1.23 TFLOP/s"


def test_notebook_charts_render_inline_offline():
    """charts.enable_inline(): a chart's notebook output is inline SVG (no CDN script), what papermill stores."""
    import altair as alt
    import pandas as pd

    from hweval import charts

    charts.enable_inline()
    try:
        bundle = alt.Chart(pd.DataFrame({"x": [1, 2]})).mark_point().encode(x="x:Q")._repr_mimebundle_()
        bundle = bundle[0] if isinstance(bundle, tuple) else bundle
        assert "<svg" in bundle["image/svg+xml"] and "text/html" not in bundle
    finally:
        alt.renderers.enable("default")


def test_report_names_how_ladder_counts_were_chosen(tmp_path):
    """A job without counts: the report's job table says each type was priced at H100-equivalent counts, and the
    options carry a GB200 tray's counts (multiples of 4, fewer accelerators than the H100 rungs)."""
    st = Store(tmp_path / "store")
    seed(st)
    job = {k: v for k, v in JOB.items() if k != "accelerators"}
    out = report.build_report(store=st, plan="p", report_dir=tmp_path / "rep", job=job, candidates=["gb200-nvl72"],
                              measured_node=NODE, today="2025-12-01")
    text = out.html.read_text()
    assert "each node type at the counts with the aggregate dense bf16 peak of 8, 16," in text
    counts = {o.accelerators for o in out.analysis.options}
    assert counts and all(c % 4 == 0 for c in counts) and min(counts) == 4
