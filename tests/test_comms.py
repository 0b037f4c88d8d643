"""hwmodels.comms: the bandwidth-ramp model, regimes, the link model, collective_time_s."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from hwmodels.comms import (AlphaBeta, CommsModel, CommsResult, LinkModel, busbw_factor, collective_time_s,
                            INTRA_EFFICIENCY, INTER_EFFICIENCY)
from hwmodels.errors import ModelInputError

ROOT = Path(__file__).resolve().parent.parent
KiB, MiB, GiB = 2**10, 2**20, 2**30
SIZES = 2.0 ** np.arange(15, 35)  # 32 KiB .. 16 GiB


def ramp_time(s, *, alpha, fill, busbw, n=8, coll="all_reduce"):
    return alpha + (math.sqrt(fill) + np.sqrt(busbw_factor(coll, n) * s / busbw)) ** 2


def noisy(t, sd, seed):
    return t * np.exp(np.random.default_rng(seed).normal(0, sd, t.size))


def test_ramp_recovers_known_parameters_and_intervals_cover():
    alpha, fill, B = 15e-6, 30e-6, 450e9
    hits = 0
    for seed in range(20):
        t = noisy(ramp_time(SIZES, alpha=alpha, fill=fill, busbw=B), 0.02, seed)
        r = CommsModel(regimes="single").fit(SIZES, time_s=t, ranks=8)
        lo, hi = r.conf_int(0.05)["busbw_inf_bytes_per_s"]
        hits += lo <= B <= hi
        assert r.busbw_inf == pytest.approx(B, rel=0.05)
    assert hits >= 16  # nominal 95%: 19 of 20 expected, 16 is far in the tail


def test_fit_to_256mib_predicts_16gib_within_interval():
    alpha, fill, B = 20e-6, 60e-6, 480e9
    t = noisy(ramp_time(SIZES, alpha=alpha, fill=fill, busbw=B), 0.03, 1)
    m = SIZES <= 256 * MiB
    r = CommsModel().fit(SIZES[m], time_s=t[m], ranks=8)
    truth = busbw_factor("all_reduce", 8) * SIZES[~m] / ramp_time(SIZES[~m], alpha=alpha, fill=fill, busbw=B)
    p = r.predict(SIZES[~m], alpha=0.1)
    assert np.all(np.abs(p["busbw"] / truth - 1) < 0.10)
    assert np.all((p["busbw_lo"] <= truth) & (truth <= p["busbw_hi"]))
    assert np.all(p["extrapolated"])
    # the prediction interval contains the interval of the mean
    assert np.all(p["pred_lo"] <= p["time_lo"]) and np.all(p["time_hi"] <= p["pred_hi"])


def test_ramp_shape_latency_then_sqrt_then_saturation():
    r = CommsModel(regimes="single").fit(SIZES, time_s=ramp_time(SIZES, alpha=10e-6, fill=40e-6, busbw=400e9),
                                         ranks=8)
    s = 2.0 ** np.arange(10, 40)
    bw = r.predict_busbw(s)
    assert np.all(np.diff(bw) > 0)  # busbw rises monotonically with size
    assert bw[-1] == pytest.approx(400e9, rel=0.01)  # ... towards B_inf
    assert bw[-1] < 400e9
    f = busbw_factor("all_reduce", 8)
    assert bw[0] == pytest.approx(f * s[0] / (10e-6 + 40e-6), rel=0.02)  # latency-bound end: F S / (alpha + fill)


def test_alpha_beta_cannot_follow_the_ramp_but_comms_model_does():
    t = ramp_time(SIZES, alpha=20e-6, fill=60e-6, busbw=480e9)
    m = SIZES <= 256 * MiB
    ab = AlphaBeta().fit(SIZES[m], time_s=t[m], ranks=8)
    r = CommsModel().fit(SIZES[m], time_s=t[m], ranks=8)
    truth = busbw_factor("all_reduce", 8) * SIZES[-1] / t[-1]
    assert abs(ab.predict_busbw(SIZES[-1])[0] / truth - 1) > 0.10
    assert abs(r.predict_busbw(SIZES[-1])[0] / truth - 1) < 0.01


def test_regime_switch_detected_and_top_regime_used_for_extrapolation():
    low = ramp_time(SIZES, alpha=100e-6, fill=5e-6, busbw=40e9, n=16)
    high = ramp_time(SIZES, alpha=700e-6, fill=30e-6, busbw=400e9, n=16)
    t = np.where(SIZES < 32 * MiB, low, high)
    m = SIZES <= 256 * MiB
    r = CommsModel().fit(SIZES[m], time_s=noisy(t[m], 0.01, 3), ranks=16)
    assert r.meta["switches_at_bytes"] == [32 * MiB]
    assert len(r.regimes) == 2
    assert r.busbw_inf == pytest.approx(400e9, rel=0.15)
    p = r.predict([1 * MiB, 8 * GiB], alpha=0.1)
    truth = busbw_factor("all_reduce", 16) * np.array([1 * MiB, 8 * GiB]) / np.array(
        [ramp_time(1 * MiB, alpha=100e-6, fill=5e-6, busbw=40e9, n=16),
         ramp_time(8 * GiB, alpha=700e-6, fill=30e-6, busbw=400e9, n=16)])
    assert np.all(np.abs(p["busbw"] / truth - 1) < 0.10)  # each size answered by its own regime
    single = CommsModel(regimes="single").fit(SIZES[m], time_s=noisy(t[m], 0.01, 3), ranks=16)
    assert len(single.regimes) == 1 and single.meta["switches_at_bytes"] == []


def test_no_switch_on_a_single_ramp():
    t = noisy(ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9), 0.02, 5)
    assert CommsModel().fit(SIZES, time_s=t, ranks=8).meta["switches_at_bytes"] == []


def test_replicates_average_and_count_distinct_sizes():
    t = ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9)
    s2 = np.r_[SIZES, SIZES]
    r = CommsModel(regimes="single").fit(s2, time_s=np.r_[t * 1.01, t / 1.01], ranks=8)
    assert r.n == 2 * SIZES.size
    assert r.dof == SIZES.size - 3
    assert r.s2_pred == pytest.approx(np.log(1.01) ** 2 * 2 * SIZES.size / SIZES.size, rel=0.05)


def test_busbw_input_equals_time_input():
    t = ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9)
    f = busbw_factor("all_reduce", 8)
    a = CommsModel().fit(SIZES, time_s=t, ranks=8)
    b = CommsModel().fit(SIZES, busbw=f * SIZES / t, ranks=8)
    assert a.busbw_inf == pytest.approx(b.busbw_inf, rel=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"busbw": [1e9, 2e9, 3e9], "time_s": [1, 2, 3]}, "exactly one"),
    ({"busbw": [1e9, 2e9]}, "3 sizes but 2"),
    ({"time_s": [1e-5, 2e-5, 3e-5]}, "at least 4 measurements"),
])
def test_fit_input_errors(kwargs, match):
    with pytest.raises(ModelInputError, match=match):
        CommsModel().fit([1e3, 1e4, 1e5], ranks=8, **kwargs)


def test_model_choices_are_validated():
    with pytest.raises(ModelInputError, match="comms.collective.*valid choices"):
        CommsModel(collective="allreduce")
    with pytest.raises(ModelInputError, match="comms.regimes"):
        CommsModel(regimes="many")


def test_result_api_summary_to_dict():
    r = CommsModel().fit(SIZES, time_s=ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9), ranks=8)
    d = r.to_dict(0.1)
    assert {"alpha_s", "fill_s", "busbw_inf_bytes_per_s", "conf_int", "regimes", "residual_sd_log_time"} <= set(d)
    assert d["level"] == pytest.approx(0.9)
    assert "B_inf" in r.summary()
    assert isinstance(r, CommsResult)
    with pytest.raises(ModelInputError):
        r.predict([0.0])


# ------------------------------------------------------------------ link model
H100_LIKE = SimpleNamespace(id="test-node", accelerators_per_node=8, intra_node_bytes_per_s=900e9,
                            inter_node_bytes_per_s=400e9)


def test_link_model_falls_back_to_old_catalog_attributes():
    lm = LinkModel.from_node(H100_LIKE)
    assert lm.intra_bytes_per_s == pytest.approx(450e9)  # datasheet 900 GB/s is both directions
    assert lm.inter_bytes_per_s == pytest.approx(50e9)  # 400 GB/s per node / 8 accelerators
    assert lm.domain == 8


def test_link_model_uses_new_catalog_attributes_when_present():
    node = SimpleNamespace(id="n", accelerators_per_node=4, intra_node_unidir_bytes_per_s=300e9,
                           inter_node_bytes_per_s_per_accelerator=25e9, scale_up_size=64,
                           intra_node_bytes_per_s=1.0, inter_node_bytes_per_s=1.0)
    lm = LinkModel.from_node(node)
    assert (lm.intra_bytes_per_s, lm.inter_bytes_per_s, lm.domain) == (300e9, 25e9, 64)
    assert lm.levels(64) == (64, 1) and lm.levels(128) == (64, 2)


def test_hierarchical_busbw_formulas():
    lm = LinkModel.from_node(H100_LIKE)
    bi, bn = INTRA_EFFICIENCY * 450e9, INTER_EFFICIENCY * 50e9
    assert lm.busbw_inf("all_reduce", 8) == pytest.approx(bi)
    # 2 nodes x 8: intra 2(k-1)/k per byte on NVLink vs inter 2(N-1)/N / k per byte on the NIC
    per_byte = max(2 * 7 / 8 / bi, 2 * 1 / 2 / 8 / bn)
    assert lm.busbw_inf("all_reduce", 16) == pytest.approx(busbw_factor("all_reduce", 16) / per_byte)
    # more nodes never raise algbw (busbw may rise: F(n) grows while the NVLink stage is the bottleneck,
    # as the published 8-GPU 480 GB/s vs 16-GPU 487 GB/s curves show); alltoall across nodes is NIC-bound
    alg = [lm.busbw_inf("all_reduce", 8 * k) / busbw_factor("all_reduce", 8 * k) for k in (1, 2, 4, 16, 64)]
    assert all(a >= b * (1 - 1e-12) for a, b in zip(alg, alg[1:]))
    assert lm.busbw_inf("alltoall", 64) < lm.busbw_inf("alltoall", 8)
    assert lm.busbw_inf("sendrecv", 16) == pytest.approx(bn)


def test_all_gather_and_reduce_scatter_cross_domains_on_one_flat_ring():
    """NCCL has no tree for all_gather/reduce_scatter (NVIDIA/nccl#1413): across domains busbw = min(intra, k NIC)."""
    lm = LinkModel.from_node(H100_LIKE)
    bi, bn = INTRA_EFFICIENCY * 450e9, INTER_EFFICIENCY * 50e9
    for coll in ("all_gather", "reduce_scatter"):
        assert lm.busbw_inf(coll, 8) == pytest.approx(bi)  # one domain: unchanged
        assert lm.busbw_inf(coll, 16) == pytest.approx(min(bi, 8 * bn))
        assert lm.busbw_inf(coll, 8 * 64) == pytest.approx(min(bi, 8 * bn))  # a ring does not aggregate
        # one rank per domain (a DP group under tp = 8): the rank's own NIC, as for any collective
        assert LinkModel.from_node(H100_LIKE, scale_up_size=1).busbw_inf(coll, 16) == pytest.approx(bn)
    # the tree all_reduce of two domains sends half the bytes through the NICs: above the ring's NIC bound
    slow_nic = LinkModel.from_node(H100_LIKE, inter_bytes_per_s=25e9)
    assert slow_nic.busbw_inf("all_reduce", 16) > 1.5 * slow_nic.busbw_inf("all_gather", 16)


def test_network_ceiling_only_where_a_flat_ring_crosses_the_network():
    lm = LinkModel.from_node(H100_LIKE)
    assert lm.network_ceiling("all_gather", 8) is None  # NVLS multicast inside a domain: no claim
    assert lm.network_ceiling("reduce_scatter", 16) == pytest.approx(8 * 50e9)
    # all_reduce: the whole result must enter each domain, t >= S / (k NIC), whatever the algorithm (even SHARP)
    assert lm.network_ceiling("all_reduce", 16) == pytest.approx(busbw_factor("all_reduce", 16) * 8 * 50e9)
    assert lm.network_ceiling("alltoall", 16) is None


def test_max_busbw_bounds_an_extrapolated_ramp():
    f = busbw_factor("all_gather", 16)
    s = 2.0 ** np.arange(15, 29)  # 32 KiB .. 256 MiB, still ramping at the top
    t = 40e-6 + (np.sqrt(400e-6) + np.sqrt(f * s / 900e9)) ** 2
    free = CommsModel(collective="all_gather", regimes="single").fit(s, time_s=t, ranks=16)
    capped = CommsModel(collective="all_gather", regimes="single", max_busbw=500e9).fit(s, time_s=t, ranks=16)
    assert free.busbw_inf == pytest.approx(900e9, rel=0.02)
    assert capped.busbw_inf <= 500e9 * (1 + 1e-9) and "busbw_inf_bytes_per_s" in capped.meta["at_bound"]
    assert capped.meta["max_busbw"] == 500e9
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ModelInputError, match="comms.max_busbw"):
            CommsModel(max_busbw=bad)


def test_public_gcp_a4_all_gather_fit_to_256mib_under_the_nic_ceiling():
    """2 x 8 B200 all_gather (esaaren/verl-on-gke): still ramping at 256 MiB; the catalog's NIC line rate holds it."""
    from hwmodels.catalog import load_catalog
    from hwmodels.nccl_tests import parse_text

    path = ROOT / "data/reference/nccl_tests/gcp_a4_2node_16gpu_all_gather.log"
    (log,) = parse_text(path.read_text(), path=str(path), ranks=16)
    s, t, b = log.arrays()
    _, ti, _ = log.arrays(inplace=True)
    m = (s >= 32 * KiB) & (s <= 256 * MiB)
    ceiling = LinkModel.from_node(load_catalog().get("b200")).network_ceiling("all_gather", 16)
    assert ceiling == pytest.approx(400e9)  # 3200 Gb/s per node over 8 GPUs, line rate
    fit = lambda mx: CommsModel(collective="all_gather", max_busbw=mx).fit(  # noqa: E731
        np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=16)
    h = s >= GiB
    p = fit(ceiling).predict(s[h], alpha=0.1)
    assert np.all(np.abs(p["busbw"] / b[h] - 1) < 0.10)
    assert np.all((p["busbw_lo"] <= b[h]) & (b[h] <= p["busbw_hi"]))
    assert np.all(fit(None).predict_busbw(s[h]) / b[h] - 1 > 0.3)  # unbounded, it overshoots the wire


def test_link_model_on_catalog_node_and_bad_inputs():
    from hwmodels.catalog import load_catalog

    node = load_catalog().get("h100-sxm")
    lm = LinkModel.from_node(node)
    assert lm.intra_bytes_per_s == pytest.approx(450e9) and lm.inter_bytes_per_s == pytest.approx(50e9)
    assert 0 < lm.busbw_inf("alltoall", 16) < lm.busbw_inf("alltoall", 8)
    t = lm.predict_time("all_reduce", [1 * MiB, 1 * GiB], 16)
    assert t[1] > t[0] > lm.inter_alpha_s
    with pytest.raises(ModelInputError, match="link.intra_bytes_per_s"):
        LinkModel(intra_bytes_per_s=0, inter_bytes_per_s=1e9, accelerators_per_node=8)
    with pytest.raises(ModelInputError, match="ranks"):
        lm.busbw_inf("all_reduce", 0)


def test_projection_to_other_rank_counts_through_link_ratio():
    t = ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9)
    r = CommsModel().fit(SIZES, time_s=t, ranks=8)
    lm = LinkModel.from_node(H100_LIKE)
    proj = r.with_link(lm)
    ratio = lm.busbw_inf("all_reduce", 64) / lm.busbw_inf("all_reduce", 8)
    big = 1024 * GiB  # far out, where latency and fill (scaled (n-1)/(n0-1) with the ring) are negligible
    assert proj.predict_busbw(big, 64)[0] == pytest.approx(r.predict_busbw(big)[0] * ratio, rel=0.03)
    assert r.predict_busbw(big, 64)[0] == pytest.approx(r.predict_busbw(big)[0], rel=0.03)  # no link: busbw kept


# ------------------------------------------------------------------ collective_time_s
def test_collective_time_s_from_each_kind_of_model():
    t = ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9)
    fit = CommsModel().fit(SIZES, time_s=noisy(t, 0.02, 2), ranks=8)
    ab = AlphaBeta().fit(SIZES, time_s=t, ranks=8)
    for m in (fit, ab, LinkModel.from_node(H100_LIKE), H100_LIKE):
        out = collective_time_s("all_reduce", 1 * GiB, 8, level=0.9, model_or_link=m)
        assert out["lo"] <= out["time_s"] <= out["hi"]
        assert out["busbw"] == pytest.approx(busbw_factor("all_reduce", 8) * GiB / out["time_s"])
        assert out["level"] == 0.9 and out["method"]
    with pytest.raises(ModelInputError, match="collective"):
        collective_time_s("allreduce", 1e6, 8, model_or_link=fit)
    with pytest.raises(ModelInputError, match="fitted on all_reduce"):
        collective_time_s("all_gather", 1e6, 8, model_or_link=fit)
    with pytest.raises(ModelInputError, match="level"):
        collective_time_s("all_reduce", 1e6, 8, level=1.5, model_or_link=fit)


# ------------------------------------------------------------------ a published curve
def test_public_dgx_h100_curve_fit_to_256mib_predicts_1_to_16gib():
    from hweval.importers.nccl_tests import parse_file

    log = parse_file(str(ROOT / "data/reference/nccl_tests/dgx_h100_8gpu_all_reduce.log"))[0]
    s, t, b = log.arrays()
    _, ti, _ = log.arrays(inplace=True)
    m = (s >= 32 * KiB) & (s <= 256 * MiB)
    r = CommsModel().fit(np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=log.ranks)
    h = s >= GiB
    p = r.predict(s[h], alpha=0.1)
    assert np.all(np.abs(p["busbw"] / b[h] - 1) < 0.10)
    assert np.all((p["busbw_lo"] <= b[h]) & (b[h] <= p["busbw_hi"]))
    # the two-parameter alpha-beta misses by > 20% there (the reason for the ramp model)
    ab = AlphaBeta().fit(np.r_[s[m], s[m]], time_s=np.r_[t[m], ti[m]], ranks=log.ranks)
    assert np.all(ab.predict_busbw(s[h]) / b[h] - 1 < -0.2)


def test_parameter_at_bound_is_flagged_and_held_fixed():
    f = busbw_factor("all_reduce", 8)
    t = (np.sqrt(50e-6) + np.sqrt(f * SIZES / 300e9)) ** 2  # no launch latency at all
    r = CommsModel(regimes="single").fit(SIZES, time_s=t, ranks=8)
    assert r.meta["at_bound"] == ["alpha_s"] and r.alpha_s < 2e-9
    assert "held fixed" in r.summary()
    lo, hi = r.conf_int(0.05)["busbw_inf_bytes_per_s"]
    assert lo == pytest.approx(300e9, rel=1e-3) and hi == pytest.approx(300e9, rel=1e-3)
    noisy_fit = CommsModel(regimes="single").fit(SIZES, time_s=noisy(t, 0.01, 4), ranks=8)
    lo, hi = noisy_fit.conf_int(0.05)["busbw_inf_bytes_per_s"]
    assert lo < 300e9 < hi and hi / lo < 1.2
    assert np.all(np.isfinite(r.predict(SIZES)["pred_hi"]))


def test_inter_node_latency_tree_vs_ring():
    tree = LinkModel.from_node(H100_LIKE)
    ring = LinkModel.from_node(H100_LIKE, inter_algorithm="ring")
    assert tree.latency(8) == ring.latency(8) == (tree.intra_alpha_s, tree.intra_fill_s)
    assert tree.latency(8 * 64)[0] == pytest.approx(tree.inter_alpha_s * 6)  # log2(64) hops
    assert ring.latency(8 * 64)[0] == pytest.approx(ring.inter_alpha_s * 63)
    assert tree.busbw_inf("all_reduce", 512) == ring.busbw_inf("all_reduce", 512)
    with pytest.raises(ModelInputError, match="inter_algorithm"):
        LinkModel.from_node(H100_LIKE, inter_algorithm="butterfly")


def test_step_projections_accept_a_ramp_fit():
    from hwmodels.comms import data_parallel_step_s, project_step_s

    t = ramp_time(SIZES, alpha=15e-6, fill=30e-6, busbw=450e9)
    r = CommsModel().fit(SIZES, time_s=t, ranks=8)
    d = data_parallel_step_s(1.0, 4 * GiB, 8, r, overlap=0.0)
    assert d["comm_s"] == pytest.approx(r.predict_time(4 * GiB, 8)[0]) and d["step_s"] == pytest.approx(1.0 + d["comm_s"])
    p = project_step_s(1.0, dp=8, tp=8, grad_bytes=8 * GiB, activation_bytes=16 * MiB, layers=4, dp_comm=r, tp_comm=r)
    assert p["step_s"] > 1.0 / 8 and p["devices"] == 64


def test_every_public_curve_is_cited_parses_and_has_held_out_sizes():
    """data/reference/nccl_tests/sources.toml: each curve names its origin and can be validated (fit <= 256 MiB,
    held out >= 1 GiB), as benchmarks/comms_validation.py does."""
    import tomllib

    from hwmodels.catalog import load_catalog
    from hwmodels.comms import BUSBW_FACTORS
    from hwmodels.nccl_tests import parse_text

    ref = ROOT / "data/reference/nccl_tests"
    cat = load_catalog()
    entries = tomllib.loads((ref / "sources.toml").read_text())
    assert len(entries) >= 14 and {"all_reduce", "all_gather"} <= {e["collective"] for e in entries.values()}
    for key, e in entries.items():
        assert e["collective"] in BUSBW_FACTORS, key
        assert e.get("url") or all(e.get(k) for k in ("repo", "path", "commit")), f"{key}: no citable origin"
        if e.get("commit"):
            assert len(e["commit"]) == 40, key
        if e.get("node"):
            assert cat.get(e["node"]) is not None, key
        text = (ref / e["file"]).read_text()
        if e.get("format") == "csv":
            rows = [ln.split(",") for ln in text.splitlines() if ln and not ln.startswith("#")][1:]
            sizes = np.array([float(r[0]) for r in rows])
        else:
            (tab,) = parse_text(text, path=e["file"], collective=e["collective"], ranks=int(e["ranks"]))
            sizes, t, _ = tab.arrays()
            assert np.all(t[sizes > 0] > 0), key
        fit = np.unique(sizes[(sizes >= 32 * KiB) & (sizes <= 256 * MiB)])
        assert fit.size >= 4 and np.any(sizes >= GiB), f"{key}: nothing to fit or nothing held out"
