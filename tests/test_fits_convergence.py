"""hwmodels.convergence: offset/floor families, averaging across families, calibrated reliability, real curves."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwmodels.convergence import Convergence, f_exp2, f_exp_drift, f_power_shift, x_to_target

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("fit_coverage", ROOT / "benchmarks" / "fit_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _mlperf(system, run):
    d = pd.read_csv(ROOT / "data/reference/loss_curves/mlperf_v31_gpt3_eval.csv", comment="#")
    g = d[(d["system"] == system) & (d["run"] == run)]
    x, y = g["tokens"].to_numpy(float), g["loss"].to_numpy(float)
    i = int(np.argmax(y <= 2.69))
    truth = x[i - 1] + (y[i - 1] - 2.69) / (y[i - 1] - y[i]) * (x[i] - x[i - 1])
    return x, y, truth


def test_warm_start_power_law_recovers_its_offset():
    x = np.linspace(1e3, 2e4, 40)
    p = np.array([50.0, 0.5, 2.0, 5e3])  # a (x + x0)^-b + c, started 5000 units into training
    y = f_power_shift(x, p) + np.random.default_rng(0).normal(0, 1e-4, x.size)
    r = Convergence(family="power_shift").fit(x, y)
    assert r.params["x0"] == pytest.approx(5e3, rel=0.1)
    assert r.params["b"] == pytest.approx(0.5, rel=0.05)
    T = float(f_power_shift(np.array([4e4]), p)[0])
    out = r.x_to_target(T)
    assert out["x_to_target"] == pytest.approx(4e4, rel=0.03) and out["lo"] < out["x_to_target"] < out["hi"]
    # the plain power law, forced onto the same curve, misplaces the target
    assert abs(Convergence(family="power").fit(x, y).x_to_target(T)["x_to_target"] / 4e4 - 1) > 0.03


def test_x_to_target_closed_forms_and_bisection_agree_with_the_curves():
    for fam, f, p in (("exp2", f_exp2, [0.3, 100.0, 1.0, 2000.0, 2.0]), ("exp_drift", f_exp_drift, [0.5, 200.0, 3.0, 1e-4]),
                      ("power_shift", f_power_shift, [100.0, 0.4, 1.5, 300.0])):
        xt = float(x_to_target(fam, np.array(p), 2.9, x_hi=1e7)[0])
        assert float(f(np.array([xt]), np.array(p))[0]) == pytest.approx(2.9, abs=1e-6)
    assert x_to_target("exp2", np.array([0.3, 100.0, 1.0, 2000.0, 2.0]), 1.9, x_hi=1e7)[0] == math.inf  # below floor


def test_autocorrelated_residuals_inflate_the_covariance():
    rng = np.random.default_rng(1)
    x = np.linspace(100, 5000, 60)
    e = np.zeros(x.size)
    for i in range(1, x.size):
        e[i] = 0.8 * e[i - 1] + 0.6 * rng.normal()
    r = Convergence(family="power").fit(x, 20 * x**-0.5 + 2 + 0.003 * e)
    assert r.meta["rho"] > 0.4 and r.meta["c_hat"] > 2


def test_interval_widens_when_families_disagree():
    x, y, truth = _mlperf("eos-dfw_n1344_ngc23.09_nemo", 0)
    k = len(x) // 2
    avg = Convergence().fit(x[:k], y[:k])
    one = Convergence(select="aicc").fit(x[:k], y[:k])
    a, o = avg.x_to_target(2.69), one.x_to_target(2.69)
    pts = [v["x_to_target"] for v in a["families"].values() if v["weight"] > 0.1]
    assert len(pts) >= 2 and a["lo"] <= min(pts) and max(pts) <= a["hi"]
    assert (a["hi"] - a["lo"]) > (o["hi"] - o["lo"])
    assert a["lo"] <= truth <= a["hi"]  # the half-curve interval covers the truth on this curve


def test_real_curve_from_80_percent_within_10_percent():
    x, y, truth = _mlperf("eos-dfw_n1344_ngc23.09_nemo", 0)
    k = int(round(0.8 * len(x)))
    out = Convergence().fit(x[:k], y[:k]).x_to_target(2.69)
    assert abs(out["x_to_target"] / truth - 1) < 0.10
    assert out["lo"] <= truth <= out["hi"]


def test_simulated_coverage_small_batch():
    b = _bench()
    res = b.run_sim(range(200000, 200020))
    rows = res["rows"][next(iter(res["rows"]))]
    cov = np.mean([r["covered"] for r in rows])
    assert len(rows) == 20 and cov >= 0.7  # 90% nominal; P(<= 14 of 20 | 0.9) ~ 1%


def test_unreachable_and_unreliable_are_said():
    rng = np.random.default_rng(4)
    x = np.linspace(10, 2000, 40)
    y = 3.0 * np.exp(-x / 300) + 1.0 + rng.normal(0, 0.005, x.size)
    out = Convergence().fit(x, y).x_to_target(0.9)
    assert out["reachable"] is False and out["reliable"] is False and "asymptote" in out["message"]
    far = Convergence(family="power").fit(x, 5 * x**-0.3 + 1 + rng.normal(0, 0.002, x.size)).x_to_target(1.2)
    assert far["reliable"] is False and "extrapolation" in far["message"]


def test_short_curve_still_fits_but_is_never_reliable():
    x = np.array([10.0, 20, 40, 80])
    r = Convergence().fit(x, 3 * x**-0.3 + 1)  # 4 points: the k + 1 fallback, as before this change
    out = r.x_to_target(1.9)
    assert out["reachable"] and not out["reliable"] and "few points" in out["message"]
