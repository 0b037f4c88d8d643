"""Cost model: Monte Carlo intervals, ranking, Pareto front, break-even and sensitivity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwmodels.catalog import HOURS_PER_YEAR, default_catalog
from hwmodels.convergence import Convergence
from hwmodels.cost import CostModel, WorkloadInput, break_even_utilization, read_workload_csv
from hwmodels.errors import ModelInputError

CAT = default_catalog()


def test_point_cost_and_energy_are_the_formula():
    w = [WorkloadInput(node="h100-sxm", nodes=2, samples_per_s=(1000.0, 1000.0, 1000.0))]
    r = CostModel(catalog=CAT, modes=("on_demand",)).fit(w, work=3.6e6)
    row = r.rows[0]
    assert row["time_to_target_s"] == pytest.approx(3600.0)
    assert row["cost_usd"] == pytest.approx(CAT.get("h100-sxm").price_per_hour("on_demand") * 2)
    node = CAT.get("h100-sxm")
    assert row["energy_kwh"] == pytest.approx(node.node_watts * 2 / 1000 * node.pue())
    assert row["lo"] == pytest.approx(row["cost_usd"]) and row["hi"] == pytest.approx(row["cost_usd"])  # no noise


def test_interval_covers_true_cost_at_about_the_level():
    rng = np.random.default_rng(0)
    true_thr, work = 500.0, 1e8
    node = CAT.get("a100-80gb-sxm")
    true_cost = work / true_thr / 3600 * node.price_per_hour("on_demand")
    hits, n = 0, 200
    for i in range(n):
        thr = tuple(rng.normal(true_thr, 25.0, 5))
        r = CostModel(catalog=CAT, modes=("on_demand",), level=0.9, n_draws=1000, seed=i).fit(
            [WorkloadInput(node="a100-80gb-sxm", samples_per_s=thr)], work=work)
        hits += r.rows[0]["lo"] <= true_cost <= r.rows[0]["hi"]
    assert 0.82 <= hits / n <= 0.96


def test_convergence_uncertainty_propagates():
    rng = np.random.default_rng(1)
    x = np.geomspace(1e3, 1e6, 25)
    y = 30 * x**-0.3 + 1.5 + rng.normal(0, 0.01, x.size)
    conv = Convergence(family="power").fit(x, y)
    w = [WorkloadInput(node="h100-sxm", samples_per_s=(1000.0,))]
    # a single measurement with a negligible noise floor: all of the width is convergence uncertainty
    r = CostModel(catalog=CAT, modes=("on_demand",), noise_floor_cv=1e-9).fit(w, convergence=conv, target=2.0)
    row = r.rows[0]
    assert row["lo"] < row["cost_usd"] < row["hi"]
    xt = conv.x_to_target(2.0, level=0.9)
    assert row["time_lo_s"] == pytest.approx(xt["lo"] / 1000.0, rel=0.05)
    unreachable = CostModel(catalog=CAT, modes=("on_demand",)).fit(w, convergence=conv, target=1.0)
    assert math.isinf(unreachable.rows[0]["cost_usd"])
    assert any("unreachable" in n for n in unreachable.notes)


def test_ranking_pareto_break_even_and_sensitivity():
    ws = [WorkloadInput(node="h100-sxm", samples_per_s=(1000.0, 1010.0, 990.0)),
          WorkloadInput(node="a100-80gb-sxm", samples_per_s=(400.0, 405.0, 395.0)),
          WorkloadInput(node="tpu-v5p", samples_per_s=(300.0, 310.0))]
    r = CostModel(catalog=CAT).fit(ws, work=1e9)
    costs = [x["cost_usd"] for x in r.rows]
    assert costs == sorted(costs) and [x["rank"] for x in r.rows] == list(range(1, len(costs) + 1))
    front = r.pareto()
    assert front and front[0] is r.rows[0]  # the cheapest is always on the front
    for p in front:  # nothing dominates a front point
        assert not any(q["time_to_target_s"] <= p["time_to_target_s"] and q["cost_usd"] < p["cost_usd"] for q in r.rows)
    for q in r.rows:
        if not q["pareto"]:
            assert any(p["time_to_target_s"] <= q["time_to_target_s"] and p["cost_usd"] <= q["cost_usd"] for p in front)
    be = {(b["node"], b["rent_mode"]): b for b in r.break_even()}
    b = be[("h100-sxm", "on_demand")]
    node = CAT.get("h100-sxm")
    op = node.price("on_prem")
    u = b["break_even_utilization"]
    # at u*, owning per used hour equals renting
    own = op.capex_usd / (op.amortization_years * HOURS_PER_YEAR * u) + node.energy_usd_per_hour()
    assert own == pytest.approx(node.price_per_hour("on_demand"))
    assert not any(k[0] == "tpu-v5p" for k in be)  # TPUs cannot be bought
    tor = r.sensitivity("h100-sxm", "on_demand")
    swings = [t["swing_usd"] for t in tor]
    assert swings == sorted(swings, reverse=True)
    assert tor[0]["input"] == "on_demand_usd_per_hour"  # +/-20% price beats ~1% throughput noise
    assert r.predict(2e9)[0]["cost_usd"] == pytest.approx(2 * r.rows[0]["cost_usd"])


def test_cost_bad_input():
    with pytest.raises(ModelInputError, match="valid choices"):
        CostModel(catalog=CAT).fit([WorkloadInput(node="h900", samples_per_s=(1.0,))], work=1.0)
    with pytest.raises(ModelInputError, match="valid choices"):
        CostModel(catalog=CAT, modes=("lease",))
    with pytest.raises(ModelInputError, match="needs samples_per_s or time_to_target_s"):
        WorkloadInput(node="h100-sxm")
    with pytest.raises(ModelInputError, match="give work"):
        CostModel(catalog=CAT).fit([WorkloadInput(node="h100-sxm", samples_per_s=(1.0,))])


def test_workload_csv_reports_bad_rows(tmp_path):
    p = tmp_path / "w.csv"
    p.write_text("node,samples_per_s,time_to_target_s,samples,loss\n"
                 "h100-sxm,100,,,\n"
                 "h100-sxm,abc,,,\n"      # line 3: non-numeric
                 "a100-80gb-sxm,,3600,,\n"
                 ",,,10,5.0\n"            # pooled loss-curve point: fine
                 ",,,20,\n"               # line 6: half a curve point
                 ",,,,\n")                # line 7: nothing
    ws, curve, bad = read_workload_csv(str(p))
    assert bad.count == 3 and bad.first_line == 3
    assert {w.node: (w.samples_per_s, w.time_to_target_s) for w in ws} == {
        "h100-sxm": ((100.0,), ()), "a100-80gb-sxm": ((), (3600.0,))}
    assert list(curve[0]) == [10.0]
    q = tmp_path / "n.csv"
    q.write_text("gpu,samples_per_s\nh100-sxm,1\n")
    with pytest.raises(ModelInputError, match="no column 'node'.*columns present: gpu, samples_per_s"):
        read_workload_csv(str(q))


@pytest.mark.parametrize("repeats", [1, 2, 3, 5])
def test_mean_interval_coverage_on_simulated_data(repeats):
    """Nominal 90% -> 85-95% coverage of the true mean, log-normal noise at the stated floor CV;
    1-2 repeats use the floor (no t with 1 dof), 3+ the repeats' own spread."""
    from hwmodels.cost import mean_interval

    rng = np.random.default_rng(repeats)
    cv, truth, n, hits, widths = 0.05, 1234.0, 2000, 0, []
    sig = math.sqrt(math.log1p(cv**2))
    for _ in range(n):
        vals = truth * np.exp(rng.normal(0.0, sig, repeats))
        mi = mean_interval(vals, 0.9, noise_floor_cv=cv)
        hits += mi["lo"] <= truth <= mi["hi"]
        widths.append(mi["lo"] / truth)
    assert 0.85 <= hits / n <= 0.95
    assert min(widths) > 0.5  # the lower bound never collapses toward zero


def test_mean_interval_says_single_or_double():
    from hwmodels.cost import mean_interval

    assert mean_interval([100.0], noise_floor_cv=0.04)["how"].startswith("single measurement")
    two = mean_interval([100.0, 300.0], noise_floor_cv=0.04)
    assert two["how"].startswith("double measurement") and 150 < two["lo"] < two["hi"] < 200
