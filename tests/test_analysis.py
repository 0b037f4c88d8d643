"""One analysis pipeline: `hweval predict --tokens`, `hweval cost --plan` and the report give the same numbers;
the itemized interval; the measured node beside its prediction; prices with quotes."""

from __future__ import annotations

import json
import math

import pytest

from hweval import analysis
from hwcore.store import Store
from tests.conftest import run_cli
from tests.test_report import seed

NODE, N, MODE = "h100-sxm", 512, "on_demand"


@pytest.fixture(scope="module")
def quick_analysis(tmp_path_factory):
    from hweval.plan import load_plan

    st = Store(tmp_path_factory.mktemp("an") / "store")
    plan = load_plan("plans/quick.yaml")
    return analysis.analyze(store=st, plan="quick", job=plan.job, candidates=[NODE])


def test_predict_cost_and_report_agree(quick_analysis, store_path):
    """The same job's numbers from the three entry points (one pipeline, not three)."""
    o = quick_analysis.option(NODE, N, MODE)
    job = quick_analysis.job
    p = run_cli("predict", "--hardware", NODE, "--accelerators", str(N), "--model", job.model,
                "--global-batch", str(job.global_batch), "--precision", job.precision, "--tokens", f"{job.tokens:g}",
                "--pricing", MODE, "--json")
    assert p.returncode == 0, p.stderr
    pred = json.loads(p.stdout.strip().splitlines()[-1])
    c = run_cli("cost", "--plan", "plans/quick.yaml", "--candidates", NODE, "--json", "--store", str(store_path))
    assert c.returncode == 0, c.stderr
    cost = json.loads(c.stdout)
    row = next(r for r in cost["options"] if (r["node"], r["accelerators"], r["pricing"]) == (NODE, N, MODE))
    for a, b in ((pred["time_to_train_s"], o.time_s), (row["time_s"], o.time_s),
                 (pred["cost_usd"], o.cost_usd), (row["cost_usd"], o.cost_usd),
                 (pred["step_time_s"], o.step_time_s), (row["cost_hi_usd"], o.cost_hi_usd)):
        assert math.isclose(a, b, rel_tol=1e-9)
    assert pred["layout"] == dict(o.layout)
    assert cost["recommendation"] == quick_analysis.recommendation


def test_interval_parts_itemized_and_combined(quick_analysis):
    o = quick_analysis.option(NODE, N, MODE)
    names = [p.name for p in o.parts]
    assert names == ["scaling law (tokens to target)", "predictor validation error", "price range"]
    lo, hi = analysis.combine(o.parts)
    assert math.isclose(o.cost_hi_usd, o.cost_usd * hi) and math.isclose(o.cost_lo_usd, o.cost_usd / lo)
    # tokens declared: the scaling-law part is exactly 1; the cost interval is wider than the time interval
    assert o.parts[0].lo_factor == o.parts[0].hi_factor == 1.0
    assert o.cost_hi_usd / o.cost_usd > o.time_hi_s / o.time_s > 1.0
    assert o.cost_lo_usd > 0.3 * o.cost_usd  # multiplicative: never collapses toward zero


def test_combine_is_log_quadrature():
    parts = [analysis.IntervalPart(name=str(i), lo_factor=f, hi_factor=f, source="") for i, f in
             enumerate((1.3, 1.4))]
    lo, hi = analysis.combine(parts)
    assert math.isclose(math.log(hi), math.hypot(math.log(1.3), math.log(1.4)))


def test_recommendation_and_pareto(quick_analysis):
    an = quick_analysis
    assert an.recommended is not None and an.recommended.pricing != "spot"
    assert an.recommended.meets_deadline
    ok = [o for o in an.options if o.meets_deadline and o.pricing != "spot"]
    assert an.recommended.cost_usd == min(o.cost_usd for o in ok)
    for o in an.options:
        dominated = any(q.time_s <= o.time_s and q.cost_usd <= o.cost_usd and
                        (q.time_s < o.time_s or q.cost_usd < o.cost_usd) for q in an.options if q is not o)
        assert o.pareto == (not dominated)


def test_measured_node_beside_its_prediction(tmp_path):
    st = Store(tmp_path / "s")
    seed(st)
    tiny = "d_model=256,n_layers=2,n_heads=4,vocab=1024,seq_len=128"
    an = analysis.analyze(store=st, plan="p", job={"model": tiny, "tokens": 1e9, "accelerators": [1],
                                                   "precision": "fp32", "global_batch": 8, "pricing": ["on_demand"]},
                          candidates=["cpu-epyc-zen4-2c"], measured_node="cpu-epyc-zen4-2c")
    (c,) = an.checks
    assert c.repeats == 3 and c.measured_lo_s < c.measured_step_s < c.measured_hi_s
    assert c.measured_how.startswith("3 repeats")
    assert c.predicted_step_s and c.predicted_step_s > 0 and c.error is not None
    # the measured node's option carries the measured noise as a fourth part
    assert an.options, an.unavailable
    o = an.options[0]
    assert [p.name for p in o.parts][-2] == "measured throughput noise"


def test_buyer_quote_replaces_catalog_price(tmp_path):
    q = tmp_path / "q.csv"
    q.write_text("node,mode,usd_per_accelerator_hour,as_of,source\n"
                 f"{NODE},{MODE},1.50,2026-11,test quote\n")
    an = analysis.analyze(store=Store(tmp_path / "s"), job={"model": "llama2-7b", "tokens": 1e12,
                                                             "accelerators": [N], "pricing": [MODE]},
                          candidates=[NODE], prices=q, today="2026-12-01")
    (o,) = an.options
    assert o.price.usd_per_accelerator_hour == 1.50 and o.price.provider == "buyer quote" and not o.price.stale
    assert o.parts[-1].lo_factor == 1.0  # a quote is taken as exact
    assert str(q) in an.prices_file


def test_cost_plan_bad_input_exit_2(store_path):
    r = run_cli("cost", "--plan", "plans/quick.yaml", "--candidates", "nope", "--store", str(store_path))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--candidates" in r.stderr
    r = run_cli("cost", "--store", str(store_path))
    assert r.returncode == 2 and "exactly one of --plan" in r.stderr


def test_committed_term_is_billed_in_full():
    from hwmodels.catalog import term_hours

    assert term_hours("1-year committed use discount") == 8766.0
    assert term_hours("EC2 Capacity Block for ML: a 1-182 day reservation (not a 1-year savings plan)") == 24.0
    assert term_hours(None) == 0.0


# -- a cell killed mid-run, then resumed: its measurements count once ---------------------------------
def _attempts_store(path):
    """Plan p, notebook 01_kernels, cells c1 and c2. Run A: c1 ok (2 rows); c2 killed after writing 1 row (no
    notebook record: the runner died). Run B (--resume): c2 again, 2 rows, ok."""
    from datetime import UTC, datetime, timedelta

    from hwcore.records import CellRecord, KernelRecord

    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    st = Store(path)

    def k(run, cell, n, minute):
        return KernelRecord(kernel="gemm", params={"n": n, "catalog_node": "cpu-epyc-zen4-2c"},
                            metrics={"median_s": 1e-3 * n}, run_id=run, plan="p",
                            notebook="01_kernels", cell_id=cell, fingerprint={"node_id": "t"},
                            started_at=t0 + timedelta(minutes=minute), finished_at=t0 + timedelta(minutes=minute)).to_record()

    def cell(run, cid, status, minute):
        return CellRecord(cell_id=cid, notebook_name="01_kernels", node="cpu", status=status, run_id=run, plan="p",
                          notebook="01_kernels", fingerprint={}, started_at=t0 + timedelta(minutes=minute - 1),
                          finished_at=t0 + timedelta(minutes=minute)).to_record()

    st.append([k("A", "c1", 1, 1), k("A", "c1", 2, 2), cell("A", "c1", "ok", 3), k("A", "c2", 3, 4)])
    st.append([k("B", "c2", 3, 10), k("B", "c2", 4, 11), cell("B", "c2", "ok", 12)])
    return st


def test_killed_attempt_is_set_aside_and_resumed_cells_keep_their_run(tmp_path, monkeypatch):
    monkeypatch.delenv("HWEVAL_CELL_ID", raising=False)
    st = _attempts_store(tmp_path / "s")
    assert len(st.records(kind="kernel")) == 5  # the store keeps every row
    m = analysis.load_measurements(st, "p")
    got = sorted((k["run_id"], k["params"]["n"]) for k in m.kernels)
    # each measurement once: c1 from run A (not re-run by the resume), c2 from its ok attempt B only
    assert got == [("A", 1), ("A", 2), ("B", 3), ("B", 4)]
    assert m.set_aside == 1


def test_counted_attempt_rules(tmp_path, monkeypatch):
    from datetime import UTC, datetime

    from hwcore import records
    from hwcore.records import Attempts, CellRecord, KernelRecord

    monkeypatch.delenv("HWEVAL_CELL_ID", raising=False)
    st = _attempts_store(tmp_path / "s")
    kern = records.read(st, KernelRecord, plan="p")
    assert sorted((r.run_id, r.cell_id) for r in kern)[0] == ("A", "c1")  # the store column, read back
    cells = records.read(st, CellRecord, plan="p")
    assert Attempts.of(kern, cells).counted == {("p", "c1"): "A", ("p", "c2"): "B"}
    # a later attempt that failed does not replace an ok one; one still running (no record) does not either
    later = datetime(2026, 12, 2, tzinfo=UTC)
    failed = CellRecord(cell_id="c1", notebook_name="01_kernels", node="cpu", status="failed", run_id="C",
                        plan="p", started_at=later, finished_at=later)
    running = KernelRecord(kernel="gemm", run_id="D", plan="p", cell_id="c2", started_at=later, finished_at=later)
    att = Attempts.of([*kern, running], [*cells, failed])
    assert att.counted == {("p", "c1"): "A", ("p", "c2"): "B"} and not att.counts(running)
    # ... unless the reader is that attempt (a notebook analysing what it just measured)
    assert Attempts.of([*kern, running], cells, own=("D", "c2")).counted[("p", "c2")] == "D"
    monkeypatch.setenv("HWEVAL_RUN_ID", "D")
    monkeypatch.setenv("HWEVAL_CELL_ID", "c2")
    assert Attempts.of([*kern, running], cells).counts(running)
    # no attempt ended ok: the latest counts (a killed cell not resumed yet keeps its partial rows)
    only = [r for r in kern if r.cell_id == "c2" and r.run_id == "A"]
    assert Attempts.of(only, [], own=None).counts(only[0])
    # rows without a cell always count
    assert att.counts(KernelRecord(kernel="gemm", run_id="Z", plan="p"))


def test_predict_kernel_points_count_one_attempt_per_cell(tmp_path, monkeypatch):
    """hweval predict's source (a) reads the store the same way: a killed attempt's rows do not count twice."""
    from hweval.commands import predict as P

    monkeypatch.delenv("HWEVAL_CELL_ID", raising=False)
    _attempts_store(tmp_path / "s")
    monkeypatch.setenv("HWEVAL_STORE", str(tmp_path / "s"))
    got = sorted((p.where, p.params["n"]) for p in P._kernel_points("cpu-epyc-zen4-2c"))
    assert got == [("(store run A)", 1), ("(store run A)", 2), ("(store run B)", 3), ("(store run B)", 4)]


def test_predict_kernel_points_find_a_suite_run_gpu_record_by_its_fingerprint(tmp_path, monkeypatch):
    """A kernel record the suite wrote on a GPU carries the fingerprint's hash as node_id, not a catalog id: hweval
    predict's source (a) matches it to the catalog by its fingerprint (the H200 device check's records had never
    been found), keeps it off the CPU node, and leaves out a kernel run on that GPU host's CPU."""
    from hwcore.records import KernelRecord
    from hweval.commands import predict as P

    fp_gpu = {"node_id": "3ea4f507e17fd50b", "gpus": [{"name": "NVIDIA H200", "index": 0}], "cpu_model": "AMD EPYC"}
    st = Store(tmp_path / "s")
    st.append([KernelRecord(kernel="gemm", params={"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
                            metrics={"flops_per_s": 7.1e14}, device="cuda", run_id="gpu", fingerprint=fp_gpu
                            ).to_record(),
               KernelRecord(kernel="stream_copy", params={"n": 2**24}, metrics={"bytes_per_s": 3e10}, device="cpu",
                            run_id="host", fingerprint=fp_gpu).to_record(),
               KernelRecord(kernel="stream_copy", params={"n": 2**24}, metrics={"bytes_per_s": 3e12}, device="cuda",
                            run_id="imported", node_id="h100-sxm", fingerprint={}).to_record()])
    monkeypatch.setenv("HWEVAL_STORE", str(tmp_path / "s"))
    assert [(p.kernel, p.where) for p in P._kernel_points("h200-sxm")] == [("gemm", "(store run gpu)")]
    assert [p.where for p in P._kernel_points("h100-sxm")] == ["(store run imported)"]
    assert P._kernel_points("cpu-epyc-zen4-2c") == []
    from hwmodels.catalog import default_catalog, record_node

    cat = default_catalog()
    assert record_node(params={"node": "b200"}, fingerprint=fp_gpu, device="cuda", catalog=cat).id == "b200"
    assert record_node(fingerprint=fp_gpu, device="cpu", catalog=cat) is None
    assert record_node(fingerprint=fp_gpu, device="cuda:0", catalog=cat).id == "h200-sxm"


def test_report_says_how_many_rows_were_set_aside(tmp_path, monkeypatch):
    from hweval import report

    monkeypatch.delenv("HWEVAL_CELL_ID", raising=False)
    st = _attempts_store(tmp_path / "s")
    out = report.build_report(store=st, plan="p", report_dir=tmp_path / "rep")
    assert out.analysis.measurements.set_aside == 1
    assert "1 measurement row(s) of superseded cell attempts" in out.html.read_text()


def test_disturbed_steps_are_flagged_beside_the_prediction():
    from hweval import analysis as A

    from hwmodels.catalog import default_catalog

    node = default_catalog().get("cpu-epyc-zen4-2c")
    gemm = [{"kernel": "gemm", "status": "ok", "params": {"m": s, "n": s, "k": s, "dtype": "fp32"},
             "flops_per_s": 8e10, "median_s": 2 * s ** 3 / 8e10} for s in (128, 256, 512)]

    def run(noise):
        return {"workload": "mlp_regressor", "status": "ok", "samples_per_s": 32 / 2e-3,
                "params": {"hidden": 32, "depth": 2, "batch_size": 32, "precision": "fp32", "nprocs": 1},
                "step_time_s": {"median_s": 2e-3, "noise_ratio": noise}}

    quiet = A.measured_checks(node, A.Measurements(kernels=tuple(gemm), workloads=(run(0.05), run(0.08))))
    loud = A.measured_checks(node, A.Measurements(kernels=tuple(gemm), workloads=(run(2.6), run(0.5), run(0.05))))
    assert quiet[0].step_noise == pytest.approx(0.08) and not quiet[0].noisy
    assert loud[0].step_noise == pytest.approx(0.5) and loud[0].noisy


def test_validation_line_names_the_band_of_hardware_without_rows(quick_analysis):
    """The report's validation line gives the held-out error and, from the same file, the bands projected rows
    carry (known hardware and a type without rows) and what they held with each publication held out."""
    from hwmodels.predict.predictor import ERROR_FILE

    kb = json.loads(ERROR_FILE.read_text())["known_hardware_band"]
    v = quick_analysis.validation
    assert v.startswith("predictor held-out error (leave-one-hardware-out, framework unknown")
    bands = [h["band_rel"] for h in kb["per_hardware"].values()]
    assert f"+/-{min(bands):.0%} to +/-{max(bands):.0%}" in v
    assert f"a hardware type without published rows: +/-{kb['prior_band_rel']:.0%}" in v
    assert f"such bands held {kb['held_out_source_coverage']['mean_group_covered']:.0%} of its rows" in v
    # the prospective runs (every set, framework unknown as the report predicts) and the same-input spread floor
    err = json.loads(ERROR_FILE.read_text())
    pro = [abs(r[st["scored_with"]]) for k, st in err["prospective"].items() if k != "method"
           for r in st["rows"].values()]
    assert f"on {len(pro)} published runs read after the step model that predicts them was committed" in v
    assert f"worst {max(pro):.0%}" in v
    pc = err["prospective_coverage"]
    assert pc["n"] == len(pro) and f"{pc['inside']} of {pc['n']} inside the 90% band they carried when read" in v
    assert f"worst error under {err['published_spread']['floor']:.0%}" in v


def test_a_job_in_a_biased_regime_says_so(tmp_path, monkeypatch):
    """The procurement answer states where the job sits in a regime the predictor's validation was biased in
    (here: long sequences predicted 16% slow), once; a job outside it gets no such note."""
    import json

    from hwmodels.predict import predictor

    err = tmp_path / "err.json"
    err.write_text(json.dumps({"bias_by_regime": {"seq_len": {">=32768": {"n": 18, "median_signed": -0.164}}}}))
    monkeypatch.setattr(predictor, "ERROR_FILE", err)
    long = analysis.job_regime_notes(analysis.parse_job({"model": "llama2-7b", "seq_len": 32768, "tokens": 1e12,
                                                         "accelerators": [8, 16], "pricing": [MODE]}), [8, 16])
    assert len(long) == 1 and "-16.4%" in long[0] and long[0].startswith("predictor: seq_len 32768")
    short = analysis.parse_job({"model": "llama2-7b", "tokens": 1e12, "accelerators": [8], "pricing": [MODE]})
    assert analysis.job_regime_notes(short, [8]) == []
    # a node type's bias is per node: stated for the node priced, with what it changes
    by_hw = tmp_path / "by_hw.json"
    by_hw.write_text(json.dumps({"bias_by_regime": {"hardware": {"b200": {"n": 27, "median_signed": 0.064},
                                                                 "h100-sxm": {"n": 220, "median_signed": -0.002}}}}))
    monkeypatch.setattr(predictor, "ERROR_FILE", by_hw)
    hw = analysis.job_regime_notes(short, [8], ["b200", "h100-sxm"])
    assert len(hw) == 1 and hw[0].startswith("predictor: hardware b200") and "+6.4%" in hw[0]
    assert "this node's rows only" in hw[0]
    # a node type whose published runs the memory model often rejected carries that record; a clean one does not
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps({"memory_fit": {"by_hardware": {
        "tpu-v6e": {"rows": 13, "predicted_not_to_fit": 11, "max_ratio": 3.28},
        "h100-sxm": {"rows": 228, "predicted_not_to_fit": 15, "max_ratio": 1.05}}}}))
    monkeypatch.setattr(predictor, "ERROR_FILE", rec)
    mem = analysis.job_regime_notes(short, [8], ["tpu-v6e", "h100-sxm"])
    assert len(mem) == 1 and mem[0].startswith("predictor: memory: on tpu-v6e") and "11 of 13" in mem[0]
    assert "3.28x" in mem[0]


def test_the_recommendation_says_when_its_layout_fits_only_by_the_point_estimate(quick_analysis):
    """Each option carries whether its layout keeps the memory model's held-out error as headroom; the
    recommendation sentence and the report's column say what the layout with that headroom costs."""
    from dataclasses import replace

    from hweval.report import _headroom

    o = quick_analysis.option(NODE, N, MODE)
    assert o.memory_margin is not None and o.capacity_GiB > 0
    assert o.memory_safe_slowdown is None or o.memory_safe_slowdown >= 0
    safe = replace(o, memory_safe_slowdown=0.0)
    assert analysis.memory_headroom_sentence(safe) is None and _headroom(safe).startswith("yes")
    tight = replace(o, memory_safe_slowdown=0.12, memory_margin=0.5, memory_per_accelerator_GiB=78.0,
                    capacity_GiB=79.6)
    s = analysis.memory_headroom_sentence(tight)
    assert "78.0 of 79.6 GiB" in s and "50% (q90)" in s and "12% slower" in s
    assert _headroom(tight) == "no: +12% time for a layout with it"
    stuck = replace(tight, memory_safe_slowdown=None)
    assert "no layout of this job fits with that headroom" in analysis.memory_headroom_sentence(stuck)
    assert _headroom(stuck) == "no: fit not settled"
    assert _headroom(replace(o, memory_margin=None)) == "n/a"
    # the recommendation sentence carries it when the recommended layout is tight
    rec = quick_analysis.recommended
    said = analysis.memory_headroom_sentence(rec)
    assert (said is None) == (rec.memory_safe_slowdown == 0.0)
    if said:
        assert said in quick_analysis.recommendation


def test_a_job_stating_its_framework_is_priced_and_banded_as_that_family(tmp_path):
    """A job with ``framework:`` prices every row with that family (the same figures as ``hweval predict
    --framework``) and the validation line names the family and the framework-stated bands."""
    from hweval.job import parse_job
    from hweval.plan import load_plan
    from hwmodels.predict.predictor import ERROR_FILE

    job = parse_job({**dict(load_plan("plans/quick.yaml").job), "framework": "megatron"})
    a = analysis.analyze(store=Store(tmp_path / "store"), plan="quick", job=job, candidates=[NODE])
    o = a.option(NODE, N, MODE)
    p = run_cli("predict", "--hardware", NODE, "--accelerators", str(N), "--model", job.model, "--global-batch",
                str(job.global_batch), "--precision", job.precision, "--tokens", f"{job.tokens:g}", "--pricing", MODE,
                "--framework", "megatron", "--json")
    assert p.returncode == 0, p.stderr
    pred = json.loads(p.stdout.strip().splitlines()[-1])
    assert pred["framework"] == "megatron" and math.isclose(pred["step_time_s"], o.step_time_s, rel_tol=1e-9)
    err = json.loads(ERROR_FILE.read_text())
    fs = err["framework_stated_band"]["known"]
    assert "the job states its framework (megatron)" in a.validation
    pfs = err["prospective_coverage"]["framework_stated"]  # the pre-registered test of that band, beside it
    assert pfs["n"] >= 10 and (f"of {pfs['n']} published runs predicted with their framework stated before they "
                               f"were read, {pfs['inside']} ({pfs['inside'] / pfs['n']:.0%}) fell inside that band, "
                               f"which claims 90%") in a.validation
    wider = max(fs["prior_band_rel"], err["known_hardware_band"]["prior_band_rel"])
    assert (f"a hardware type without published rows: +/-{wider:.0%}, no narrower than with the framework"
            in a.validation)


def test_a_deadline_job_without_counts_prices_each_type_at_the_same_aggregate_peak(tmp_path):
    """With no counts asked for, each node type is priced at the ladder's counts of H100-equivalent dense bf16
    peak (hweval.job.ladder_counts), so a type with a tenth of the peak per accelerator is not held to a tenth
    of the compute; the report says how the counts were chosen."""
    from hweval.job import COUNT_LADDER, ladder_counts, parse_job
    from hwmodels.catalog import load_catalog

    job = parse_job({"model": "llama2-7b", "tokens": 1e11, "global_batch": 1024, "deadline_days": 30,
                     "pricing": [MODE]})
    opts, _ = analysis.job_options(job, analysis.job_tokens(job), load_catalog(), candidates=["h100-sxm", "trn1"])
    got = {nid: sorted({o.accelerators for o in opts if o.node == nid}) for nid in ("h100-sxm", "trn1")}
    assert got["h100-sxm"] and set(got["h100-sxm"]) <= set(COUNT_LADDER)
    cat = load_catalog()
    want = ladder_counts(cat.get("trn1"), analysis.ladder_reference_flops(cat))
    assert got["trn1"] and set(got["trn1"]) <= set(want) and min(want) > min(COUNT_LADDER)
    assert all(c % 32 == 0 for c in got["trn1"])


def test_the_runner_up_sentence_reads_the_held_out_order_record_not_the_interval_overlap(tmp_path):
    """Whether the recommended option and the cheapest one on another type are separated comes from how often
    held-out pairs of types predicted as far apart were ordered right (both types with published rows: the
    leave-one-out record; else the leave-one-hardware-out one), not from their intervals overlapping (the token
    budget's part is common to both); without that record, the overlap rule."""
    from hweval.job import parse_job
    from hwmodels.catalog import load_catalog

    job = parse_job({"model": "llama2-7b", "tokens": 1e11, "global_batch": 1024, "accelerators": [64],
                     "pricing": [MODE]})
    opts, _ = analysis.job_options(job, analysis.job_tokens(job), load_catalog(),
                                   candidates=["h100-sxm", "a100-80gb-sxm"])
    rec, other = sorted(opts, key=lambda o: o.cost_usd)
    assert rec.node != other.node and rec.cost_hi_usd > other.cost_lo_usd  # the intervals overlap
    gap = other.cost_usd / rec.cost_usd - 1

    def write(name, known_right, new_right, rows=9):
        sec = lambda right: {"scored_with": "s", "ratio_error": {"q90": 0.3}, "bins": [  # noqa: E731
            {"gap_lo": 0.0, "gap_hi": None, "pairs": 40, "ordered_right": right}]}
        f = tmp_path / name
        f.write_text(json.dumps({"known_hardware_band": {"per_hardware": {rec.node: {"n": rows}, other.node: {"n": 9}}},
                                 "ranking_reliability": {"known": sec(known_right), "new": sec(new_right)}}))
        return f
    held = analysis.runner_up_sentence(rec, other, 0.9, write("held.json", 39, 10))
    assert f"predicted {gap:.0%} dearer" in held and "39 of 40" in held and "leave-one-out" in held
    assert "the order stands" in held and "do not separate" not in held
    # one of the two without published rows: the leave-one-hardware-out record decides
    new = analysis.runner_up_sentence(rec, other, 0.9, write("new.json", 39, 10, rows=2))
    assert "10 of 40" in new and "leave-one-hardware-out" in new and "the data do not separate them" in new
    # no record: the intervals' overlap, as before
    old = analysis.runner_up_sentence(rec, other, 0.9, tmp_path / "missing.json")
    assert "overlaps within the 90% intervals" in old


def test_a_job_without_a_framework_is_told_what_the_framework_spans(tmp_path):
    """The note the report carries when job.framework is not stated: the fitted families' compute factors from the
    validation file, the time ratio between the slowest and fastest, the families to choose from and the two band
    ranges; none once a framework is stated, and none from a file with fewer than two fitted families."""
    from hwmodels.predict.predictor import MIN_STATED_FAMILY_ROWS, framework_spread_note

    fam = lambda eta: {"eta": eta, "comm_eff": 1.0, "overlap_cost": 0.0, "rows": MIN_STATED_FAMILY_ROWS}  # noqa: E731
    band = lambda lo, hi: {"per_hardware": {"a": {"band_rel": lo, "n": 9}, "b": {"band_rel": hi, "n": 9},  # noqa: E731
                                            "c": {"band_rel": 0.99, "n": 1}}}
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"framework_efficiency": {"eta": 0.8, "per_family": {
        "slow": fam(0.5), "fast": fam(1.1), "other": fam(2.0), "tiny": {**fam(9.0), "rows": 1}}},
        "known_hardware_band": band(0.4, 0.5), "framework_stated_band": {"known": band(0.2, 0.3)}}))
    note = framework_spread_note(f)
    assert "eta 0.80" in note and "slow (eta 0.50) to fast (1.10)" in note and "2.2x as long" in note
    assert "'other'" not in note and "tiny" not in note  # "other" is no family; one with too few rows neither
    assert "+/-20%..30% against +/-40%..50%" in note  # a type with fewer rows than the minimum does not set the span
    one = tmp_path / "one.json"  # (the validation file is read once per path)
    one.write_text(json.dumps({"framework_efficiency": {"eta": 0.8, "per_family": {"slow": fam(0.5)}}}))
    assert framework_spread_note(one) is None
    st = Store(tmp_path / "store")
    an = analysis.analyze(store=st, plan="quick", job={"model": "llama2-7b", "tokens": 1e10, "accelerators": [8],
                                                       "pricing": ["on_demand"]}, candidates=[NODE])
    assert any("framework not stated" in n for n in an.notes)
    an2 = analysis.analyze(store=st, plan="quick", job={"model": "llama2-7b", "tokens": 1e10, "accelerators": [8],
                                                        "pricing": ["on_demand"], "framework": "megatron"},
                           candidates=[NODE])
    assert not any("framework not stated" in n for n in an2.notes)


def test_the_recommended_option_is_priced_per_framework_of_its_stack_when_the_job_states_none(tmp_path):
    """by_framework: the recommended node, count and mode priced once per fitted family with published runs on the
    node's software stack (no Neuron family on a GPU), each with its family's factor; fastest first, the fastest
    family's factor the largest; the report shows the table; a job that states its framework gets none."""
    from hwmodels.predict.predictor import families_on_stack, framework_efficiency_of

    st = Store(tmp_path / "store")
    job = {"model": "llama2-7b", "tokens": 1e10, "accelerators": [8], "pricing": ["on_demand"]}
    an = analysis.analyze(store=st, plan="quick", job=job, candidates=[NODE])
    fams = [r["framework"] for r in an.by_framework]
    assert set(fams) == set(families_on_stack("cuda")) and "neuron" not in fams and len(fams) >= 3
    times = [r["time_s"] for r in an.by_framework]
    assert times == sorted(times)
    assert an.by_framework[0]["eta"] == max(r["eta"] for r in an.by_framework)
    for r in an.by_framework:
        assert r["eta"] == framework_efficiency_of(r["framework"])[0]
        assert r["time_lo_s"] < r["time_s"] < r["time_hi_s"] and r["cost_lo_usd"] < r["cost_usd"] < r["cost_hi_usd"]
    assert an.to_dict()["by_framework"][0]["framework"] == fams[0]
    assert "by framework family" in an.summary() and f"  {fams[0]} " in an.summary()
    from hweval.report import render
    html = render(an, tmp_path / "report").html.read_text()
    assert "The recommended option by framework" in html and fams[-1] in html
    stated = analysis.analyze(store=st, plan="quick", job={**job, "framework": "megatron"}, candidates=[NODE])
    assert stated.by_framework == ()
    assert families_on_stack("neuron") == ("neuron",) and families_on_stack("no-such-stack") == ()
