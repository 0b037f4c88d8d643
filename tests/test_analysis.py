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
