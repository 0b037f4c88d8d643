"""Each model recovers known parameters from noisy synthetic data, its intervals cover at about
the stated rate, and it reproduces a published case (tests/data/README.md)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hwmodels.comms import (AlphaBeta, busbw_factor, data_parallel_step_s, pipeline_parallel_step_s, project_step_s,
                            tensor_parallel_step_s)
from hwmodels.convergence import Convergence
from hwmodels.errors import ModelInputError
from hwmodels.roofline import Roofline
from hwmodels.scaling import Scaling, efficiency

DATA = Path(__file__).resolve().parent / "data"
DRAWS = 200


def _read(name):
    return pd.read_csv(DATA / name, comment="#")


def _coverage_band(hits: int, n: int, level: float) -> None:
    # binomial sd at n=200 is ~1.5-2%; the band is ~4 sd wide on the low side
    rate = hits / n
    assert level - 0.08 <= rate <= min(level + 0.05, 1.0), f"coverage {rate:.3f} vs nominal {level}"


# ----------------------------------------------------------------------------- scaling
def test_usl_recovers_parameters_and_ci_coverage():
    rng = np.random.default_rng(0)
    n = np.array([1, 2, 4, 8, 16, 32, 64, 128.0])
    true = dict(x1=100.0, sigma=0.03, kappa=2e-4)
    f = lambda N: true["x1"] * N / (1 + true["sigma"] * (N - 1) + true["kappa"] * N * (N - 1))  # noqa: E731
    hits = {"sigma": 0, "kappa": 0}
    est = []
    for _ in range(DRAWS):
        y = f(n) * np.exp(rng.normal(0, 0.03, n.size))
        r = Scaling(model="usl", errors="multiplicative").fit(n, y)
        ci = r.conf_int(0.05)
        for k in hits:
            hits[k] += ci[k][0] <= true[k] <= ci[k][1]
        est.append(r.params["sigma"])
    assert np.median(est) == pytest.approx(true["sigma"], rel=0.15)
    for k in hits:
        _coverage_band(hits[k], DRAWS, 0.95)


def test_scaling_prediction_interval_coverage_and_auto_selection():
    rng = np.random.default_rng(1)
    n = np.array([1, 2, 4, 8, 16, 32.0])
    f = lambda N: 50 * N / (1 + 0.05 * (N - 1))  # noqa: E731  Amdahl, s = 0.05
    hits, amdahl_picked = 0, 0
    for _ in range(DRAWS):
        y = f(n) + rng.normal(0, 5, n.size)
        r = Scaling().fit(n, y)
        amdahl_picked += r.model == "amdahl"
        p = r.predict([24.0], alpha=0.1)
        y_new = f(24.0) + rng.normal(0, 5)
        hits += p["lo"][0] <= y_new <= p["hi"][0]
    _coverage_band(hits, DRAWS, 0.9)
    assert amdahl_picked / DRAWS > 0.6  # BIC prefers the true, smaller model most of the time


def test_usl_published_specsdm91():
    d = _read("usl_specsdm91.csv")
    r = Scaling(model="usl", errors="additive").fit(d["load"], d["throughput"])
    # R usl package README: sigma 0.0277285 (0.0091217), kappa 0.0001044 (0.0000199), gamma 89.995
    assert r.params["sigma"] == pytest.approx(0.0277285, rel=1e-3)
    assert r.params["kappa"] == pytest.approx(0.0001044, rel=2e-3)
    assert r.params["x1"] == pytest.approx(89.995, rel=1e-3)
    assert r.bse["sigma"] == pytest.approx(0.0091217, rel=5e-3)
    assert r.bse["kappa"] == pytest.approx(0.0000199, rel=2e-2)
    assert Scaling().fit(d["load"], d["throughput"]).model == "usl"  # throughput falls: Amdahl cannot
    assert 80 < r.peak_devices() < 110


def test_mlperf_published_scaling_efficiency():
    d = _read("mlperf_v3_gpt3_h100.csv")
    thr = 1.0 / d["minutes"].to_numpy()  # trainings per minute
    eff = efficiency(d["gpus"], thr)
    assert eff[-1] == pytest.approx(0.89, abs=0.01)  # "89% performance scaling efficiency"
    r = Scaling(model="amdahl").fit(d["gpus"], thr)
    assert r.efficiency([3584])[0] / r.efficiency([768])[0] == pytest.approx(0.89, abs=0.02)
    assert 0 < r.params["s"] < 1e-3


def test_scaling_bad_input():
    with pytest.raises(ModelInputError, match="must be > 0"):
        Scaling().fit([1, 2, 0], [1, 2, 3])
    with pytest.raises(ModelInputError, match="valid choices"):
        Scaling(model="gustafson")
    with pytest.raises(ModelInputError, match="at least"):
        Scaling(model="usl").fit([1, 2, 4], [1, 2, 3])


# ----------------------------------------------------------------------------- comms
def test_alpha_beta_recovers_and_covers():
    rng = np.random.default_rng(2)
    sizes = np.geomspace(1e3, 1e9, 25)
    alpha, B, n = 20e-6, 100e9, 8
    F = busbw_factor("all_reduce", n)
    assert F == pytest.approx(2 * 7 / 8)
    hits_a = hits_b = 0
    for _ in range(DRAWS):
        t = (alpha + F * sizes / B) * np.exp(rng.normal(0, 0.05, sizes.size))
        r = AlphaBeta().fit(sizes, busbw=F * sizes / t, ranks=n)
        ci = r.conf_int(0.05)
        hits_a += ci["alpha_s"][0] <= alpha <= ci["alpha_s"][1]
        hits_b += ci["beta_bytes_per_s"][0] <= B <= ci["beta_bytes_per_s"][1]
    _coverage_band(hits_a, DRAWS, 0.95)
    _coverage_band(hits_b, DRAWS, 0.95)
    r = AlphaBeta().fit(sizes, time_s=alpha + F * sizes / B, ranks=n)
    assert r.alpha_s == pytest.approx(alpha, rel=1e-6) and r.beta_bytes_per_s == pytest.approx(B, rel=1e-6)
    # ring latency scaling (Thakur et al.): alpha grows with (n-1)
    assert r.alpha_at(15) == pytest.approx(alpha * 14 / 7)
    assert r.predict_busbw([1e12])[0] == pytest.approx(B, rel=1e-3)


def test_alpha_beta_published_nccl_tests_sweep():
    d = _read("nccl_tests_issue44_allreduce_2gpu.csv")
    size = d["count"].to_numpy() * 4.0  # float32 elements -> bytes (see the file's header)
    # the transcription is self-consistent: algbw = bytes / time
    assert np.allclose(size / (d["time_us"] * 1e-6) / 1e9, d["algbw"], rtol=0.02)
    r = AlphaBeta().fit(size, busbw=d["busbw"].to_numpy() * 1e9, ranks=2)
    assert 19e9 < r.beta_bytes_per_s < 23e9  # the plateau is ~20-21.4 GB/s
    assert 5e-6 < r.alpha_s < 20e-6  # the smallest messages take ~13 us
    big = size >= 8 * 2**20
    pred = r.predict_busbw(size[big])
    assert np.allclose(pred, d["busbw"].to_numpy()[big] * 1e9, rtol=0.08)


def test_parallel_projections():
    comm = AlphaBeta().fit([1e6, 1e9], time_s=[1e-3 + 1e6 / 1e10 * 1.75, 1e-3 + 1e9 / 1e10 * 1.75], ranks=8)
    t_ar = float(comm.predict_time(1e9, 8)[0])
    # DP fully hidden when the all-reduce is shorter than backward, exposed otherwise
    d = data_parallel_step_s(1.0, 1e9, 8, comm, overlap=1.0)
    assert d["step_s"] == pytest.approx(1.0 + max(0, t_ar - 2 / 3))
    assert data_parallel_step_s(1.0, 1e9, 8, comm, overlap=0.0)["step_s"] == pytest.approx(1.0 + t_ar)
    tp = tensor_parallel_step_s(1.0, 1e6, 8, comm, layers=2)
    assert tp["step_s"] == pytest.approx(1.0 / 8 + 8 * float(comm.predict_time(1e6, 8)[0]))
    pp = pipeline_parallel_step_s(1.0, 4, 12)
    assert pp["bubble_fraction"] == pytest.approx(3 / 15)  # (p-1)/(m+p-1)
    assert pp["step_s"] == pytest.approx(15 * 1.0 / 48)
    assert pp["bubble_s"] / pp["ideal_s"] == pytest.approx(3 / 12)  # Narayanan et al.: (p-1)/m
    full = project_step_s(1.0, dp=2, tp=1, pp=4, microbatches=12, grad_bytes=4e8, dp_comm=comm)
    assert full["devices"] == 8 and full["step_s"] >= pp["step_s"]
    with pytest.raises(ModelInputError, match="tp_comm"):
        project_step_s(1.0, tp=2)


# ----------------------------------------------------------------------------- convergence
def test_power_law_with_offset_recovers_and_covers():
    rng = np.random.default_rng(3)
    x = np.geomspace(100, 1e5, 30)
    a, b, c = 50.0, 0.5, 2.0
    target = 2.3
    x_true = (a / (target - c)) ** (1 / b)
    hits_b = hits_x = 0
    for i in range(DRAWS):
        y = a * x**-b + c + rng.normal(0, 0.01, x.size)
        r = Convergence(family="power").fit(x, y)
        lo, hi = r.conf_int(0.1)["b"]
        hits_b += lo <= b <= hi
        xt = r.x_to_target(target, level=0.9, n_draws=1000, seed=i)
        hits_x += xt["lo"] <= x_true <= xt["hi"]
    _coverage_band(hits_b, DRAWS, 0.9)
    _coverage_band(hits_x, DRAWS, 0.9)


def test_family_selection_and_unreachable_target():
    rng = np.random.default_rng(4)
    x = np.linspace(10, 2000, 40)
    y = 3.0 * np.exp(-x / 300) + 1.0 + rng.normal(0, 0.005, x.size)
    r = Convergence(select="aicc").fit(x, y)  # the single lowest-AICc family (the default averages families)
    assert r.model == "exp"
    assert r.params["tau"] == pytest.approx(300, rel=0.05)
    # exp2 and exp_drift nest exp and share some of the (quasi-)Akaike weight; exp keeps the largest
    assert r.candidates["exp"]["weight"] == max(c["weight"] for c in r.candidates.values()) > 0.5
    out = r.x_to_target(0.9)
    assert out["reachable"] is False and out["reliable"] is False
    assert "below the fitted asymptote" in out["message"]
    ok = r.x_to_target(1.5)
    assert ok["reachable"] and ok["x_to_target"] == pytest.approx(-300 * math.log(0.5 / 3), rel=0.05)
    avg = Convergence(select="average").fit(x, y).x_to_target(1.5)
    assert avg["x_to_target"] == pytest.approx(ok["x_to_target"], rel=0.05)


def test_interval_too_wide_is_said_plainly():
    rng = np.random.default_rng(5)
    x = np.geomspace(100, 1000, 8)  # one decade, noisy: the asymptote is poorly pinned
    y = 50 * x**-0.5 + 2 + rng.normal(0, 0.05, x.size)
    r = Convergence(family="power").fit(x, y)
    out = r.x_to_target(2.05)
    assert out["reliable"] is False
    assert "too wide" in out["message"] or "extrapolation" in out["message"] or "unreachable" in out["message"]


def test_chinchilla_published_law():
    p = _read("chinchilla_approach3.csv").set_index("param")["value"].astype(float)
    N = p["N"]
    c_true = p["E"] + p["A"] / N ** p["alpha"]
    D = np.geomspace(1e9, 1.4e12, 25)
    L = c_true + p["B"] / D ** p["beta"]
    rng = np.random.default_rng(6)
    r = Convergence(family="power").fit(D, L + rng.normal(0, 1e-3, D.size))
    assert r.params["b"] == pytest.approx(p["beta"], rel=0.05)
    assert r.params["c"] == pytest.approx(c_true, abs=0.02)
    # the published law's loss at Chinchilla's 1.4T tokens, and tokens back from that loss
    L_chin = c_true + p["B"] / p["D"] ** p["beta"]
    assert L_chin == pytest.approx(1.94, abs=0.01)
    assert r.x_to_target(L_chin)["x_to_target"] == pytest.approx(p["D"], rel=0.15)


# ----------------------------------------------------------------------------- roofline
def _kernels(rng, P, B, n=60, noise=0.05, dtype=None, level=None):
    F = np.geomspace(1e6, 1e10, n)
    I = np.geomspace(0.05, 200, n)
    Q = F / I
    t = np.maximum(F / P, Q / B) * np.exp(rng.normal(0, noise, n))
    d = {"flops": F, "bytes": Q, "seconds": t}
    if dtype:
        d["dtype"] = [dtype] * n
    if level:
        d["level"] = [level] * n
    return pd.DataFrame(d)


def test_roofline_lsq_recovers_and_covers():
    rng = np.random.default_rng(7)
    P, B = 2e11, 3e10
    hits_p = hits_b = 0
    for _ in range(DRAWS):
        r = Roofline(method="lsq").fit(_kernels(rng, P, B, n=30))
        ci = r.conf_int()
        hits_p += ci["peak_flops_per_s[default]"][0] <= P <= ci["peak_flops_per_s[default]"][1]
        hits_b += ci["bytes_per_s[dram]"][0] <= B <= ci["bytes_per_s[dram]"][1]
    _coverage_band(hits_p, DRAWS, 0.95)
    _coverage_band(hits_b, DRAWS, 0.95)


def test_roofline_ceilings_per_dtype_and_level_and_placement():
    rng = np.random.default_rng(8)
    df = pd.concat([_kernels(rng, 2e11, 3e10, dtype="fp32", level="dram", noise=0.01),
                    _kernels(rng, 4e11, 3e10, dtype="bf16", level="dram", noise=0.01),
                    _kernels(rng, 2e11, 2e11, dtype="fp32", level="l2", noise=0.01)])
    r = Roofline(method="lsq").fit(df)
    assert r.compute["fp32"] == pytest.approx(2e11, rel=0.02)
    assert r.compute["bf16"] == pytest.approx(4e11, rel=0.02)
    assert r.memory["dram"] == pytest.approx(3e10, rel=0.02)
    assert r.memory["l2"] == pytest.approx(2e11, rel=0.02)
    env = Roofline().fit(df)
    assert env.compute["bf16"] >= max(df[df.dtype == "bf16"].eval("flops/seconds")) * 0.9999
    assert env.ridge_intensity == pytest.approx(env.peak_flops_per_s / env.peak_bytes_per_s)
    assert env.attainable(0.01) == pytest.approx(0.01 * env.peak_bytes_per_s)
    assert env.attainable(1e6) == pytest.approx(env.peak_flops_per_s)
    from hwmodels.catalog import default_catalog

    node = default_catalog().get("cpu-epyc-zen4-2c")
    pts = pd.DataFrame({"flops": [1e9], "bytes": [1e6], "seconds": [1e9 / 1e11], "dtype": ["fp32"], "level": ["dram"]})
    placed = r.place(pts, node=node)
    assert placed["bound"].iloc[0] == "compute"
    assert placed["efficiency_fit"].iloc[0] == pytest.approx(1e11 / r.compute["fp32"], rel=1e-6)
    assert placed["efficiency_datasheet"].iloc[0] == pytest.approx(1e11 / 236.8e9, rel=1e-6)


def test_roofline_bad_input():
    with pytest.raises(ModelInputError, match="no column 'seconds'"):
        Roofline().fit(pd.DataFrame({"flops": [1], "bytes": [1]}))
    with pytest.raises(ModelInputError, match="seconds must be > 0"):
        Roofline().fit(flops=[1.0], bytes=[1.0], seconds=[0.0])


def test_grouped_scaling_fit_equals_the_ungrouped_least_squares():
    from hwmodels.results import nls
    from hwmodels.scaling import usl

    rng = np.random.default_rng(9)
    n = np.repeat([1, 2, 4, 8, 16, 32, 64.0], 5)
    y = 80 * n / (1 + 0.02 * (n - 1) + 3e-4 * n * (n - 1)) + rng.normal(0, 3, n.size)
    r = Scaling(model="usl").fit(n, y)  # collapses the 5 repeats per device count
    p, cov, rss, dof = nls(usl, n, y, r.values, bounds=([0, 0, 0], [np.inf, 1, np.inf]))  # raw rows
    assert np.allclose(r.values, p, rtol=1e-4)
    assert r.rss == pytest.approx(rss, rel=1e-6) and r.dof == dof == n.size - 3
    assert np.allclose(np.sqrt(np.diag(r.cov)), np.sqrt(np.diag(cov)), rtol=1e-3)


def test_roofline_conf_int_at_other_alpha():
    rng = np.random.default_rng(10)
    r = Roofline(method="lsq").fit(_kernels(rng, 2e11, 3e10, n=40))
    wide, narrow = r.conf_int(0.05), r.conf_int(0.5)
    for k in wide:
        assert wide[k][0] < narrow[k][0] < narrow[k][1] < wide[k][1]


def test_roofline_published_v100_gpp_placement():
    from hwmodels.catalog import parse_node
    from hwmodels.roofline import fma_ceiling

    d = _read("roofline_v100_gpp.csv").set_index("quantity")["value"].astype(float)
    peak = d["sm_count"] * d["fp64_fma_units_per_sm"] * 2 * d["clock_GHz"] * 1e9
    assert peak / 1e12 == pytest.approx(d["peak_tflops"], abs=0.05)  # 6.72 -> "6.7 TFLOP/s"
    v100 = parse_node({
        "id": "v100-test", "name": "V100 (test)", "kind": "gpu",
        "accelerators": {"per_node_count": 1, "source": "one GPU, for this test"},
        "peak": {"fp64": {"dense_tflops": peak / 1e12, "source": "arXiv:2008.11326 at 1312 MHz",
                          "derivation": {"units_count": d["sm_count"],
                                         "flops_per_clock_per_unit_count": 2 * d["fp64_fma_units_per_sm"],
                                         "clock_GHz": d["clock_GHz"], "source": "Tesla V100 whitepaper"}}},
        "memory": {"capacity_GB": 16, "bandwidth_GBps": 900, "source": "Tesla V100 datasheet (900 GB/s HBM2)"},
        "links": {"intra_node_GBps": 300, "inter_node_Gbps": 100, "source": "V100 datasheet NVLink 300 GB/s"},
        "power": {"tdp_watts": 300, "node_watts": 300, "source": "V100 SXM2 300 W"},
        "pricing": {m: {"available": False, "source": "not priced in this test"}
                    for m in ("on_demand", "reserved", "spot", "on_prem")},
    }, "v100-test")
    # the kernel is placed in the compute-bound region (intensity 50 FLOP/B, above the ridge 6.7e12/9e11)
    flops = 3.7e12
    pt = pd.DataFrame({"flops": [flops], "bytes": [flops / 50], "seconds": [1.0], "dtype": ["fp64"], "level": ["hbm"]})
    ceilings = Roofline().fit(pd.DataFrame({"flops": [peak, 1.0], "bytes": [1.0, 9e11], "seconds": [1.0, 1.0],
                                            "dtype": ["fp64", "fp64"], "level": ["hbm", "hbm"]}))
    placed = ceilings.place(pt, node=v100)
    assert placed["bound"].iloc[0] == "compute"
    assert placed["efficiency_datasheet"].iloc[0] == pytest.approx(d["efficiency_vs_peak"], abs=0.01)
    custom = fma_ceiling(peak, d["fma_ratio"])
    assert custom / 1e12 == pytest.approx(d["customized_peak_tflops"], abs=0.05)
    assert flops / custom == pytest.approx(d["efficiency_vs_customized"], abs=0.01)
    # the same datasheet entry with the figure doubled (a "with sparsity"-style slip) is rejected
    with pytest.raises(ModelInputError, match="derivation"):
        parse_node(_v100_dict_with_peak(peak * 2 / 1e12, d), "v100-bad")


def _v100_dict_with_peak(tflops, d):
    return {
        "id": "v100-bad", "name": "V100 (bad)", "kind": "gpu",
        "accelerators": {"per_node_count": 1, "source": "one GPU, for this test"},
        "peak": {"fp64": {"dense_tflops": tflops, "source": "doubled on purpose",
                          "derivation": {"units_count": d["sm_count"],
                                         "flops_per_clock_per_unit_count": 2 * d["fp64_fma_units_per_sm"],
                                         "clock_GHz": d["clock_GHz"], "source": "Tesla V100 whitepaper"}}},
        "memory": {"capacity_GB": 16, "bandwidth_GBps": 900, "source": "Tesla V100 datasheet"},
        "links": {"intra_node_GBps": 300, "inter_node_Gbps": 100, "source": "V100 datasheet"},
        "power": {"tdp_watts": 300, "node_watts": 300, "source": "V100 SXM2 300 W"},
        "pricing": {m: {"available": False, "source": "not priced in this test"}
                    for m in ("on_demand", "reserved", "spot", "on_prem")},
    }


def test_t_quantile_matches_the_tabulated_student_t_and_normal_quantiles():
    """Without scipy.stats: t(0.975, 1) = 12.706, t(0.975, 10) = 2.228, t(0.95, 30) = 1.697 (standard tables); the
    normal 0.975 quantile 1.960 for infinite or non-positive dof; symmetric about 0.5."""
    from hwmodels.results import t_quantile

    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert t_quantile(0.95, 30) == pytest.approx(1.697, abs=1e-3)
    assert t_quantile(0.975, math.inf) == pytest.approx(1.960, abs=1e-3) == t_quantile(0.975, 0)
    assert t_quantile(0.05, 7) == pytest.approx(-t_quantile(0.95, 7))
