"""hwmodels.predict: FLOPs and bytes against hand-computed cases, Korthikanti memory, fit boundaries, search, sources."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from hwmodels.catalog import default_catalog
from hwmodels.errors import ModelInputError
from hwmodels.predict import (KernelPoint, Layout, calibrate, from_workload, make_prediction, parse_spec, predict_job,
                              preset, search, step_times)
from hwmodels.predict import ops as O
from hwmodels.predict.collectives import bus_factor, collective_time
from hwmodels.predict.memory import activation_bytes_per_layer, estimate, korthikanti_per_layer

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def a100(cat):
    return calibrate(cat.get("a100-80gb-sxm"))


# ------------------------------------------------------------------------------- spec
def test_gpt3_175b_parameter_count_and_flops():
    s = preset("gpt3-175b")
    h, L, V, T = 12288, 96, 50257, 2048
    assert s.layer_params() == 12 * h * h + 4 * h  # 4h^2 attention + 8h^2 MLP + 2 LayerNorms (weight+bias)
    n = s.n_params()
    assert n == L * (12 * h * h + 4 * h) + V * h + T * h + 2 * h  # tied embedding + learned positions + final LN
    assert abs(n / 175e9 - 1) < 0.005  # Brown et al. 2020: "175B"
    # PaLM appendix B: 6 N_matmul + 12 L T d per token
    assert s.model_flops_per_token() == 6 * (L * 12 * h * h + V * h) + 12 * L * T * h


def test_llama_presets_match_published_sizes():
    # published sizes (Touvron 2023 / Llama Team 2024), within 1.5%
    for name, billions in (("llama2-7b", 6.74), ("llama2-13b", 13.0), ("llama2-70b", 69.0), ("llama3-8b", 8.03),
                           ("llama3-70b", 70.6), ("llama3-405b", 405.9)):
        assert abs(preset(name).n_params() / (billions * 1e9) - 1) < 0.015, name


def test_parse_spec_pairs_and_errors():
    s = parse_spec("d_model=4096,n_layers=32,n_heads=32,vocab=50368,ffn_mult=4")
    assert s.ffn_dim == 16384 and s.n_kv_heads == 32 and not s.glu
    g = parse_spec("d_model=4096,n_layers=32,n_heads=32,n_kv_heads=8,ffn_dim=14336,glu=true,vocab=128256")
    assert g.d_kv == 1024 and g.glu
    with pytest.raises(ModelInputError, match="unknown key 'foo'.*valid keys: d_model"):
        parse_spec("d_model=64,foo=1")
    with pytest.raises(ModelInputError, match="valid choices"):
        parse_spec("gpt5")
    with pytest.raises(ModelInputError, match="n_heads"):
        parse_spec("d_model=100,n_layers=2,n_heads=3,vocab=10")
    with pytest.raises(ModelInputError, match="missing key 'vocab'"):
        parse_spec("d_model=64,n_layers=2,n_heads=4")


def test_transformer_lm_workload_matches_the_workload_flop_count():
    from workloads import flops as wf

    cfg = {"layers": 3, "width": 96, "heads": 4, "seq_len": 32, "vocab": 200, "mlp_ratio": 4}
    spec = from_workload("transformer_lm", cfg)
    ref = wf.transformer(layers=3, width=96, heads=4, seq_len=32, vocab=200, mlp_ratio=4, batch_size=1)
    assert spec.n_params() == ref.params
    assert spec.model_flops_per_token() * 32 == ref.model_flops_per_step
    gru = from_workload("timeseries_forecaster", {"hidden": 16, "layers": 2, "context": 10, "horizon": 4})
    ref = wf.gru(input_size=1, hidden=16, layers=2, context=10, horizon=4, batch_size=1)
    assert gru.n_params() == ref.params
    assert gru.model_flops_per_sample() == ref.model_flops_per_step
    mlp = from_workload("mlp_regressor", {"hidden": 32, "depth": 3})
    assert mlp.n_params() == wf.mlp(features=8, hidden=32, depth=3, outputs=1, batch_size=1).params


# -------------------------------------------------------------------------------- ops
def test_layer_op_flops_are_72h2_plus_12th_per_token():
    s = preset("gpt3-175b")
    h, T = s.d_model, 2048
    ops = O.layer_ops(s, micro_batch=1, seq_len=T, tp=1, recompute="none")
    model = sum(o.model_flops for o in ops if o.kind in ("gemm", "attention"))
    assert model / T == pytest.approx(72 * h * h + 12 * T * h, rel=1e-12)  # 3 x (24 h^2 + 4 T h)
    # tensor parallelism splits the layer's FLOPs evenly
    ops8 = O.layer_ops(s, micro_batch=1, seq_len=T, tp=8, recompute="none")
    assert sum(o.model_flops for o in ops8) * 8 == pytest.approx(model, rel=1e-12)
    # full recompute runs the forward again: executed GEMM FLOPs = 4/3 of the model GEMM FLOPs
    full = O.layer_ops(s, micro_batch=1, seq_len=T, recompute="full")
    g = sum(o.flops for o in full if o.kind == "gemm")
    assert g == pytest.approx(4 / 3 * 72 * h * h * T, rel=1e-12)
    # flash attention executes half the forward (causal) and 2.5x that backward (FlashAttention-2 convention)
    att = [o for o in ops if o.kind == "attention"]
    assert sum(o.flops for o in att) == pytest.approx((0.5 + 1.25) * 4 * T * T * h)


def test_step_flops_hfu_counts_recompute():
    s = preset("gpt3-175b")
    m, hw = O.step_flops(s, seq_len=2048, sequences=4, recompute="full")
    assert m == s.model_flops_per_token() * 4 * 2048
    assert hw > m and (hw - m) == pytest.approx((2 * 96 * 12 * 12288 ** 2 + 4 * 96 * 2048 * 12288) * 4 * 2048)


def test_tp_and_dp_collectives():
    s = preset("gpt3-175b")
    ops = O.layer_ops(s, micro_batch=2, seq_len=1024, tp=8, sp=False)
    ar = [o for o in ops if o.kind == "collective"]
    assert len(ar) == 4 and all(o.collective == "all_reduce" and o.nbytes == 2 * 1024 * 12288 * 2 for o in ar)
    sp = [o for o in O.layer_ops(s, micro_batch=2, seq_len=1024, tp=8, sp=True) if o.kind == "collective"]
    assert sorted(o.collective for o in sp) == ["all_gather"] * 4 + ["reduce_scatter"] * 4
    fs = O.dp_collectives(sharding="full_shard", local_params=1e9, layer_params_local=1e7, n_layers_local=100,
                          microbatches=2, precision="bf16")
    assert sorted(o.name for o in fs) == ["fsdp.all_gather.bwd", "fsdp.all_gather.fwd", "fsdp.reduce_scatter"]
    assert all(o.count == 200 for o in fs)
    assert O.dp_collectives(sharding="ddp", local_params=1e9, layer_params_local=1, n_layers_local=1,
                            microbatches=4, precision="bf16")[0].nbytes == 4e9


# ------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("tp,sp", [(1, False), (8, False), (8, True)])
def test_korthikanti_activation_memory(recompute, tp, sp):
    s = preset("gpt3-175b")  # ffn = 4h, MHA: the paper's assumptions
    got = activation_bytes_per_layer(s, micro_batch=1, seq_len=2048, tp=tp, sp=sp, recompute=recompute, flash=False)
    want = korthikanti_per_layer(2048, 1, 12288, 96, tp, sp=sp, recompute=recompute)
    assert got == pytest.approx(want, rel=1e-12)


def test_korthikanti_closed_forms():
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    assert korthikanti_per_layer(s, b, h, a, t, sp=True, recompute="none") == s * b * h * (34 + 5 * a * s / h) / t
    assert korthikanti_per_layer(s, b, h, a, t, sp=False, recompute="selective") == s * b * h * (10 + 24 / t)
    assert korthikanti_per_layer(s, b, h, a, t, sp=True, recompute="full") == 2 * s * b * h / t
    # flash attention stores no s x s scores: same as selective recompute
    spec = preset("gpt3-175b")
    assert activation_bytes_per_layer(spec, micro_batch=1, seq_len=s, tp=t, sp=True, recompute="none",
                                      flash=True) == korthikanti_per_layer(s, b, h, a, t, sp=True,
                                                                           recompute="selective")


@pytest.mark.parametrize("tp,sp", [(1, False), (8, False), (8, True)])
@pytest.mark.parametrize("flash", [True, False])
def test_no_dropout_stores_no_masks(tp, sp, flash):
    """Korthikanti's 34 sbh holds two 1-byte dropout masks (attention output, MLP output: TP-replicated unless SP
    splits them) and, with materialized scores, a 1-byte mask and a 2-byte dropout output per score; a model trained
    without dropout (the Llama presets) stores 2 sbh less and 2 a s^2 b of scores instead of 5."""
    s, b, h, a = 2048, 1, 12288, 96
    with_do = preset("gpt3-175b")
    assert with_do.dropout and not preset("llama3-405b").dropout and not preset("llama2-7b").dropout
    assert "dropout" in preset("llama3-8b").source
    no_do = replace(with_do, dropout=False)
    for rc in ("none", "selective"):
        kw = dict(micro_batch=b, seq_len=s, tp=tp, sp=sp, recompute=rc, flash=flash)
        masks = 2.0 * s * b * h / (tp if sp else 1)
        scores = 0.0 if (flash or rc == "selective") else 3.0 * a * s * s * b / tp
        assert activation_bytes_per_layer(no_do, **kw) == pytest.approx(
            activation_bytes_per_layer(with_do, **kw) - masks - scores, rel=1e-12)
    kw = dict(micro_batch=b, seq_len=s, tp=tp, sp=sp, recompute="full", flash=flash)
    assert activation_bytes_per_layer(no_do, **kw) == activation_bytes_per_layer(with_do, **kw)
    assert parse_spec("d_model=1024,n_layers=2,n_heads=8,vocab=1000,dropout=false").dropout is False
    assert parse_spec("d_model=1024,n_layers=2,n_heads=8,vocab=1000").dropout is True
    with pytest.raises(ModelInputError, match="dropout"):
        parse_spec("d_model=1024,n_layers=2,n_heads=8,vocab=1000,dropout=maybe")


@pytest.mark.parametrize("precision,q", [("fp8", 1.0), ("fp4", 0.5625)])
@pytest.mark.parametrize("glu", [False, True])
def test_fp8_fp4_linears_save_their_inputs_quantized(precision, q, glu):
    """Under TE the QKV and MLP-up inputs (s b h each) and the MLP-down input (s b f) are kept at the GEMM input
    type instead of 2 B; everything else, and full recompute's layer input, unchanged; quantized_saves=False (torchao
    float8) keeps the 16-bit figure."""
    spec = parse_spec(f"d_model=1024,n_layers=4,n_heads=8,ffn_dim=2816,glu={str(glu).lower()},vocab=1000")
    s, b, h, f = 2048, 2, 1024, 2816
    for tp, sp in ((1, False), (4, False), (4, True)):
        kw = dict(micro_batch=b, seq_len=s, tp=tp, sp=sp)
        wide = activation_bytes_per_layer(spec, **kw)
        narrow = activation_bytes_per_layer(spec, precision=precision, **kw)
        replicated_saved = (2.0 - q) * 2 * s * b * h  # QKV and MLP-up inputs: TP-replicated unless SP splits them
        down_saved = (2.0 - q) * s * b * f / tp  # MLP-down input: split over TP ranks
        want = wide - (replicated_saved / (tp if sp else 1) + down_saved)
        assert narrow == pytest.approx(want, rel=1e-12)
        assert activation_bytes_per_layer(spec, recompute="full", precision=precision, **kw) == \
            activation_bytes_per_layer(spec, recompute="full", **kw)
    common = dict(capacity_bytes=1e12, sharding="zero1", dp=8, tp=1, pp=1, micro_batch=1, seq_len=s,
                  recompute="none", sp=False)
    te = estimate(spec, precision=precision, **common)
    hp = estimate(spec, precision=precision, quantized_saves=False, **common)
    assert hp.activations == pytest.approx(estimate(spec, precision="bf16", **common).activations)
    assert te.activations < hp.activations
    with pytest.raises(ModelInputError, match="layout.quantized_saves"):
        Layout(dp=1, quantized_saves="yes")


def test_search_carries_quantized_saves(cat):
    """The search prices every layout it considers with the caller's ``quantized_saves`` (torchao float8: 16-bit
    saved inputs, more activation memory for the same layout)."""
    node = cat.get("h100-sxm")
    cal = calibrate(node)
    kw = dict(hardware=node.id, accelerators=8, global_batch=64, precision="fp8", tp=1, pp=1, sharding="full_shard",
              micro_batch=2, recompute="none", top=1)
    te, hp = (search(preset("llama3-8b"), cal, quantized_saves=q, **kw) for q in (True, False))
    assert te.best.layout.quantized_saves and not hp.best.layout.quantized_saves
    assert hp.best.memory_per_accelerator_GiB > te.best.memory_per_accelerator_GiB


def test_zero_state_bytes_and_fit_boundary():
    s = preset("llama2-7b")
    kw = dict(precision="bf16", tp=1, pp=1, micro_batch=1, seq_len=4096, recompute="full", sp=False)
    ddp = estimate(s, capacity_bytes=1e12, sharding="ddp", dp=8, **kw)
    n = s.n_params()
    assert ddp.weights + ddp.grads + ddp.optimizer == pytest.approx(16 * n)  # ZeRO paper: 16 bytes per parameter
    z1 = estimate(s, capacity_bytes=1e12, sharding="zero1", dp=8, **kw)
    assert z1.optimizer == pytest.approx(12 * n / 8)
    z3 = estimate(s, capacity_bytes=1e12, sharding="full_shard", dp=8, **kw)
    assert z3.grads == pytest.approx(2 * n / 8) and z3.weights < ddp.weights / 4
    total = z3.total
    assert estimate(s, capacity_bytes=total, sharding="full_shard", dp=8, **kw).fits
    assert not estimate(s, capacity_bytes=total * (1 - 1e-9), sharding="full_shard", dp=8, **kw).fits


# --------------------------------------------------------------------------- calibration
def test_calibration_sources_are_labelled(a100):
    src = a100.sources()
    for key in ("matmul_efficiency.bf16", "memory_bandwidth", "attention_efficiency", "collective_busbw.intra",
                "collective_busbw.inter", "launch_overhead"):
        assert key in src
        assert src[key].split(":")[0] in ("measured", "imported", "published", "datasheet"), src[key]
    assert src["matmul_efficiency.bf16"].startswith("published")  # mamf-finder figure, not a bare derating
    assert a100.source_kinds()["collective_busbw.inter"] == "published"  # nccl-tests p4de log


def test_published_memory_bandwidth_is_priced_with_its_corroboration(cat, tmp_path):
    """A node's first published memory_bw_GBps row prices memory-bound time, its other rows are named beside it;
    a node without one keeps the labelled datasheet derating; a measured STREAM record still wins."""
    node = cat.get("mi300x")
    cal = calibrate(node)
    assert cal.mem_bw.kind == "published" and cal.mem_bw.value == pytest.approx(3948e9)
    assert "0.74 of the datasheet" in cal.mem_bw.source and "other published rows: 4256 GB/s (copy)" in \
        cal.mem_bw.source
    g = calibrate(cat.get("gaudi2")).mem_bw
    assert g.kind == "datasheet" and g.value == pytest.approx(cat.get("gaudi2").memory_bandwidth_bytes_per_s * 0.85)
    pt = KernelPoint(kernel="stream_triad", params={}, metrics={"bytes_per_s": 4.2e12, "bytes": 3 * 2**30},
                     where="run y")
    assert calibrate(node, [pt]).mem_bw.kind == "measured"


def test_measured_points_win(cat):
    node = cat.get("h100-sxm")
    pt = KernelPoint(kernel="gemm", params={"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
                     metrics={"flops_per_s": 700e12}, where="run x")
    cal = calibrate(node, [pt])
    assert cal.matmul_eff_max["bf16"].kind == "measured"
    assert calibrate(node, use_published=False).matmul_eff_max["bf16"].kind == "datasheet"


def test_gemm_efficiency_depends_on_shape(a100):
    big = a100.gemm_eff(8192, 8192, 8192, "bf16")
    assert big > a100.gemm_eff(8192, 8192, 64, "bf16") > 0  # small-k falloff
    units = a100.units
    # wave quantization: one more tile than the SMs can run in one wave costs a second wave
    full_wave = a100.gemm_eff(256 * units, 128, 4096, "bf16")
    one_over = a100.gemm_eff(256 * units + 256, 128, 4096, "bf16")
    assert one_over < full_wave


def test_collective_time_conventions(a100):
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert collective_time(a100, kind="all_reduce", size_bytes=1e9, ranks=1, level="intra") == 0
    intra = collective_time(a100, kind="all_reduce", size_bytes=1e9, ranks=8, level="intra")
    inter = collective_time(a100, kind="all_reduce", size_bytes=1e9, ranks=16, level="inter", ranks_per_node=8)
    share = collective_time(a100, kind="all_reduce", size_bytes=1e9, ranks=16, level="inter", ranks_per_node=1)
    assert intra < inter < share
    # a pair across nodes meets one NIC; the same pair inside the node runs at NVLink speed
    p2p_inter = collective_time(a100, kind="send_recv", size_bytes=1e9, ranks=2, level="inter")
    assert p2p_inter > collective_time(a100, kind="send_recv", size_bytes=1e9, ranks=2, level="intra")


def _reference_points(name: str, ranks: int):
    """The out-of-place and in-place (size, time) points of one published nccl-tests log, as the store holds them."""
    from hwmodels.nccl_tests import parse_text

    (tab,) = parse_text((REPO / "data/reference/nccl_tests" / name).read_text(), collective="all_reduce", ranks=ranks)
    return tab, [KernelPoint(kernel="all_reduce", params={"size_bytes": r.size_bytes, "ranks": ranks, "nodes": 1},
                             metrics={"time_s": r.time_s, "inplace_time_s": r.inplace_time_s}, origin="imported",
                             where="dgx log") for r in tab.rows]


def test_collective_time_is_the_comms_model_fitted_on_the_calibration_points(cat):
    """8-rank all-reduce of 1 GiB on h100-sxm: the predictor's time is hwmodels.comms' prediction from the same points."""
    import numpy as np

    from hwmodels.comms import CommsModel, collective_time_s
    from hwmodels.predict.calibration import COMMS_FIT_MIN_BYTES

    tab, pts = _reference_points("dgx_h100_8gpu_all_reduce.log", 8)
    cal = calibrate(cat.get("h100-sxm"), pts)
    assert cal.comms["intra"].kind == "imported" and "all_reduce imported records of this node" in cal.sources()[
        "collective_busbw.intra"]
    # a record that `hweval import` wrote (provenance in params) is source (b) even when handed in as measured
    marked = [replace(p, origin="measured", params={**p.params, "importer": "nccl-tests"}) for p in pts]
    assert calibrate(cat.get("h100-sxm"), marked).comms["intra"].kind == "imported"
    s = np.array([r.size_bytes for r in tab.rows] * 2, dtype=float)
    t = np.array([r.time_s for r in tab.rows] + [r.inplace_time_s for r in tab.rows])
    keep = (s >= COMMS_FIT_MIN_BYTES) & (t > 0)
    res = CommsModel(collective="all_reduce").fit(s[keep], time_s=t[keep], ranks=8)
    want = collective_time_s("all_reduce", 2**30, 8, model_or_link=res)
    got = collective_time(cal, kind="all_reduce", size_bytes=2**30, ranks=8, level="intra")
    assert got == pytest.approx(want["time_s"], rel=1e-9)
    assert got == pytest.approx(float(res.predict_time(2**30)[0]), rel=1e-9)
    # the published curve itself (no points given) is the same log: the same time
    pub = calibrate(cat.get("h100-sxm"))
    assert pub.comms["intra"].kind == "published" and "dgx_h100_8gpu_all_reduce.log" in pub.sources()[
        "collective_busbw.intra"]
    assert collective_time(pub, kind="all_reduce", size_bytes=2**30, ranks=8, level="intra") == pytest.approx(got)
    # the model's own interval enters the calibration uncertainty, weighted by the exposed-comm share
    assert pub.rel_sigma(comm_share=0.5) > pub.rel_sigma()


def test_node_without_curves_uses_the_link_model(cat):
    from hwmodels.comms import LinkModel

    node = cat.get("gaudi2")
    cal = calibrate(node)
    for level in ("intra", "inter"):
        lc = cal.comms[level]
        assert not lc.fits and lc.kind == "datasheet"
        src = cal.sources()[f"collective_busbw.{level}"]
        assert src.startswith("datasheet: link model") and "no measured, imported or published" in src
    link = LinkModel.from_node(node)
    for kind, n, level in (("all_reduce", 8, "intra"), ("all_gather", 8, "intra")):
        got = collective_time(cal, kind=kind, size_bytes=2**30, ranks=n, level=level)
        assert got == pytest.approx(float(link.predict_time(kind, 2**30, n)[0]), rel=1e-9)
    # 16 ranks on 2 nodes, 8 per node: the link model's own hierarchy
    got = collective_time(cal, kind="all_reduce", size_bytes=2**30, ranks=16, level="inter", ranks_per_node=8)
    assert got == pytest.approx(float(link.predict_time("all_reduce", 2**30, 16)[0]), rel=1e-9)


def test_nccl_tests_has_one_parser():
    """The importer parses through hwmodels.nccl_tests: no second parser of the format."""
    import hweval.importers.nccl_tests as NT
    from hwmodels import nccl_tests as H

    assert NT.parse.__module__ == "hweval.importers.nccl_tests" and NT.NcclRow is H.NcclRow
    assert issubclass(NT.NcclLog, H.NcclTable)
    with pytest.raises(ModelInputError, match="x.log:2: a result row needs 13 columns"):
        H.parse_text("# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n1024 256 float",
                     path="x.log", collective="all_reduce")


# ------------------------------------------------------------------------ step and search
def test_step_breakdown_and_prediction_json(a100):
    s = preset("gpt3-175b")
    lay = Layout(dp=8, tp=8, pp=16, interleave=3, micro_batch=1, sharding="zero1", recompute="full",
                 sequence_parallel=True)
    p = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=1024, global_batch=1536,
                        tokens=300e9, usd_per_accelerator_hour=4.0, pricing="on_demand")
    d = p.to_dict()
    for k in ("tokens_per_s", "tokens_per_s_per_accelerator", "step_time_s", "mfu", "memory_per_accelerator_GiB",
              "fits", "layout", "breakdown_s", "interval", "calibration", "time_to_train_s", "accelerator_hours",
              "cost_usd"):
        assert k in d, k
    assert set(d["breakdown_s"]) == {"compute", "memory_bound", "exposed_comm", "bubble", "overhead"}
    assert d["step_time_s"] == pytest.approx(sum(d["breakdown_s"].values()))
    assert d["breakdown_s"]["bubble"] > 0 and 0 < d["mfu"] < d["hfu"] < 1
    lo, hi = d["interval"]["cost_usd"]
    assert lo < d["cost_usd"] < hi and d["interval"]["level"] == 0.9
    assert d["cost_usd"] == pytest.approx(d["accelerator_hours"] * 4.0)
    assert d["tokens_per_s"] == pytest.approx(1536 * 2048 / d["step_time_s"])
    with pytest.raises(ModelInputError, match="dp\\*tp\\*pp"):
        make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=1000, global_batch=1536)


def test_more_bandwidth_is_never_slower(cat):
    s = preset("llama2-13b")
    lay = Layout(dp=64, tp=1, pp=1, micro_batch=2, sharding="full_shard", recompute="full")
    cal = calibrate(cat.get("a100-80gb-sxm"))
    base = replace(cal, comms={k: replace(c, fits={}, geometries={}) for k, c in cal.comms.items()})  # link model only
    t0 = step_times(s, base, lay, global_batch=512).total
    fast = replace(base, comms={k: replace(c, link=replace(c.link, intra_bytes_per_s=c.link.intra_bytes_per_s * 4,
                                                            inter_bytes_per_s=c.link.inter_bytes_per_s * 4))
                                for k, c in base.comms.items()})
    assert step_times(s, fast, lay, global_batch=512).total < t0
    # a fitted curve: 4x its asymptotic busbw is faster too
    quick = replace(cal, comms={k: replace(c, fits={n: replace(f, regimes=tuple(
        replace(r, theta=r.theta - [0.0, 0.0, math.log(4)]) for r in f.regimes)) for n, f in c.fits.items()})
        for k, c in cal.comms.items()})
    assert step_times(s, quick, lay, global_batch=512).total < step_times(s, cal, lay, global_batch=512).total


def test_search_returns_only_fitting_layouts(cat):
    node = cat.get("a100-40gb-sxm")
    cal = calibrate(node)
    res = search(preset("gpt3-13b"), cal, hardware=node.id, accelerators=64, global_batch=512, top=4)
    assert res.best is not None and len(res.runners_up) == 3
    for p in (res.best, *res.runners_up):
        assert p.fits and p.memory.total <= node.memory_capacity_bytes
        assert p.layout.world == 64
    times = [p.step_time_s for p in (res.best, *res.runners_up)]
    assert times == sorted(times)
    none = search(preset("gpt3-175b"), cal, hardware=node.id, accelerators=8, global_batch=64)
    assert none.best is None and none.smallest_memory is not None and not none.smallest_memory[1].fits


def test_predict_job_fixed_and_auto():
    fixed = predict_job(hardware="h100-sxm", accelerators=16, model="llama2-7b", tp=2, pp=1, sharding="zero1",
                        micro_batch=2, activation_checkpointing="selective", global_batch=64)
    assert fixed.layout.dp == 8 and fixed.layout.sequence_parallel
    auto = predict_job(hardware="h100-sxm", accelerators=16, model="llama2-7b", global_batch=64, tp=1)
    assert auto.best.layout.tp == 1 and auto.best.fits
    with pytest.raises(ModelInputError, match="must divide"):
        predict_job(hardware="h100-sxm", accelerators=10, model="llama2-7b", tp=4, pp=1, sharding="ddp",
                    micro_batch=1, activation_checkpointing="none")
    # context parallelism splits each sequence: a degree that does not divide it is refused, fixed or searched
    for kw in ({"tp": 1, "pp": 1, "sharding": "zero1", "micro_batch": 1, "activation_checkpointing": "none"}, {}):
        with pytest.raises(ModelInputError, match=r"cp: must be a positive divisor of the sequence length \(4096\), got 3"):
            predict_job(hardware="h100-sxm", accelerators=48, model="llama2-7b", cp=3, global_batch=48, **kw)
    with pytest.raises(ModelInputError, match="got 0"):
        predict_job(hardware="h100-sxm", accelerators=16, model="llama2-7b", cp=0, global_batch=64)


def test_predict_package_imports_no_framework_or_app():
    code = ("import sys, hwmodels.predict, hwmodels.predict.search\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'hweval', 'hwcore', 'workloads')]\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_interval_reads_validation_error(tmp_path, a100):
    import json

    p = tmp_path / "err.json"
    p.write_text(json.dumps({"leave_one_hardware_out": {"per_hardware": {"a100-80gb-sxm": {"q90": 0.12, "n": 9}},
                                                         "overall": {"q90": 0.3}},
                             "framework_efficiency": {"eta": 0.8, "comm_eff": 1.0}}))
    s = preset("llama2-7b")
    lay = Layout(dp=8, micro_batch=1, sharding="zero1", recompute="none")
    pr = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=8, global_batch=64, error_path=p)
    share = pr.breakdown_s["exposed_comm"] / pr.step_time_s
    assert pr.interval["relative"] == pytest.approx(math.sqrt(0.12 ** 2 + a100.rel_sigma(comm_share=share) ** 2))
    other = make_prediction(s, a100, lay, hardware="mi300x", accelerators=8, global_batch=64, error_path=p)
    assert other.interval["relative"] > pr.interval["relative"]  # no rows for that hardware: overall LOHO error


def test_interval_prefers_the_framework_unknown_error(tmp_path, a100):
    """A new prediction uses one framework factor for all frameworks, so its interval is the held-out error scored
    that way, when the validation file has it."""
    import json

    from hwmodels.predict.predictor import held_out_error

    p = tmp_path / "err.json"
    p.write_text(json.dumps({
        "leave_one_hardware_out": {"per_hardware": {"a100-80gb-sxm": {"q90": 0.12, "n": 9}}, "overall": {"q90": 0.3}},
        "leave_one_hardware_out_any_framework": {"per_hardware": {"a100-80gb-sxm": {"q90": 0.2, "n": 9}},
                                                 "overall": {"q90": 0.4}}}))
    assert held_out_error("a100-80gb-sxm", p)[0] == pytest.approx(0.2)
    rel, how = held_out_error("mi300x", p)
    assert rel == pytest.approx(0.4) and "framework unknown" in how and "held" not in how.split("rows")[-1]
    p.write_text(json.dumps({"leave_one_hardware_out_any_framework": {"overall": {"q90": 0.4}},
                             "interval_coverage": {"overall_covered": 0.86}}))
    held_out_error.__globals__["_errors"].cache_clear()
    assert "held 86% of that hardware's published rows" in held_out_error("mi300x", p)[1]
    # a calibrated band for hardware without rows, when the file has one, is preferred to the pooled q90
    p.write_text(json.dumps({"leave_one_hardware_out_any_framework": {"overall": {"q90": 0.4}},
                             "never_seen_band": {"level": 0.9, "quantile": 0.95, "band_rel": 0.43, "met": True,
                                                 "coverage": {"mean_hardware_covered": 0.91}}}))
    held_out_error.__globals__["_errors"].cache_clear()
    rel, how = held_out_error("mi300x", p)
    assert rel == pytest.approx(0.43) and "q95" in how and "(91%)" in how and "short" not in how


def test_measured_gemm_sweep_sets_the_shape_curve(cat):
    node = cat.get("cpu-epyc-zen4-2c")
    peak = node.peaks["fp32"].dense_flops_per_s
    pts = [KernelPoint(kernel="gemm", params={"m": n, "n": n, "k": n, "dtype": "fp32"},
                       metrics={"flops_per_s": peak * eff}) for n, eff in ((64, 0.1), (256, 0.4), (1024, 0.8))]
    cal = calibrate(node, pts)
    assert cal.gemm_eff(256, 256, 256, "fp32") == pytest.approx(0.4)
    assert 0.4 < cal.gemm_eff(512, 512, 512, "fp32") < 0.8  # interpolated on log FLOPs
    assert cal.gemm_eff(4096, 4096, 4096, "fp32") == pytest.approx(0.8)  # clamped
    assert cal.matmul_eff_max["fp32"].kind == "measured"


def test_pipeline_bubble_follows_narayanan(a100):
    s = preset("gpt3-175b")
    kw = dict(dp=1, tp=8, pp=8, micro_batch=1, sharding="none", recompute="full", sequence_parallel=True)
    st1 = step_times(s, a100, Layout(interleave=1, **kw), global_batch=16)
    st2 = step_times(s, a100, Layout(interleave=2, **kw), global_batch=16)
    # bubble = (p - 1) / v x per-micro-batch stage time (compute + memory-bound + TP and p2p traffic)
    assert 7 * st1.compute / 16 < st1.bubble < 7 * (st1.compute + st1.memory_bound + st1.exposed_comm) / 16
    assert st2.bubble == pytest.approx(st1.bubble / 2, rel=0.05)  # p2p doubles with v, the rest halves


def test_hybrid_shard_keeps_sharded_traffic_in_the_domain(cat):
    cal = calibrate(cat.get("tpu-v5e"))
    s = parse_spec("d_model=4096,n_layers=16,n_heads=32,vocab=32000")
    flat = Layout(dp=512, micro_batch=2, sharding="full_shard", recompute="full")
    hyb = replace(flat, hybrid_shard=True)
    assert hyb.shard_degree(cal.scale_up_size) == 256 and flat.shard_degree(cal.scale_up_size) == 512
    t_flat = step_times(s, cal, flat, global_batch=1024)
    t_hyb = step_times(s, cal, hyb, global_batch=1024)
    # both hide nearly all of it under compute (exposed is the 5% floor); the hybrid layout moves less: across the
    # DCN its replicas all-reduce one shard, where the flat one all-gathers and reduce-scatters every layer
    assert t_hyb.comm_total < t_flat.comm_total
    assert t_hyb.memory.weights > t_flat.memory.weights  # sharded over fewer ranks


def test_predict_workload_local_closed_loop(cat):
    from hwmodels.predict.predictor import predict_workload

    cal = calibrate(cat.get("cpu-epyc-zen4-2c"))
    small = predict_workload("transformer_lm", {"layers": 2, "width": 64, "heads": 4, "seq_len": 64, "vocab": 256,
                                                "batch_size": 16}, cal)
    big = predict_workload("transformer_lm", {"layers": 4, "width": 128, "heads": 4, "seq_len": 64, "vocab": 256,
                                              "batch_size": 16}, cal)
    assert 0 < small["step_time_s"] < big["step_time_s"]
    ck = predict_workload("transformer_lm", {"layers": 2, "width": 64, "heads": 4, "seq_len": 64, "vocab": 256,
                                             "batch_size": 16, "activation_checkpointing": True}, cal)
    assert ck["hardware_flops_per_step"] > ck["model_flops_per_step"] and ck["step_time_s"] > small["step_time_s"]
    for name, cfg in (("timeseries_forecaster", {"hidden": 32, "context": 64}), ("mlp_regressor", {"hidden": 64})):
        out = predict_workload(name, {**cfg, "batch_size": 32}, cal)
        assert out["step_time_s"] > 0 and set(out["breakdown_s"]) >= {"compute", "memory_bound"}


# ------------------------------------------------------------------------------- attention kernels
def test_attention_kernel_curves_from_published_rows(cat):
    """Each implementation's published fwd+bwd curve prices its own rate; rows without kernel= are FlashAttention-2."""
    h100 = calibrate(cat.get("h100-sxm"))
    assert h100.attention_kernels()[0] == "flash_attn_2"
    assert "flash_attn_1" in h100.attention_kernels()
    flops = 1e12
    # FlashAttention-2 causal hd128 on H100 reaches 328 TFLOP/s at 16k (published.csv), FlashAttention v1 137
    fa2 = flops / h100.attention_time(flops, 16384, "bf16") / 1e12
    fa1 = flops / h100.with_attention_kernel("flash_attn_1").attention_time(flops, 16384, "bf16") / 1e12
    assert 300 < fa2 < 345 and 125 < fa1 < 145
    # beyond the longest published sequence the rate stays on the plateau: 64k within 3% of 16k, never above
    # the non-causal 16k rate (338 TFLOP/s)
    fa2_64k = flops / h100.attention_time(flops, 65536, "bf16") / 1e12
    assert fa2 <= fa2_64k < min(fa2 * 1.03, 338.0)
    # the same object when asked for the kernel it already prices; a helpful error for one without a curve
    assert h100.with_attention_kernel("flash_attn_2") is h100
    with pytest.raises(ModelInputError, match="flash_attn_1"):
        h100.with_attention_kernel("flash_attn_triton")
    a100 = calibrate(cat.get("a100-40gb-sxm"))
    tri = a100.with_attention_kernel("flash_attn_triton")
    assert 75 < flops / tri.attention_time(flops, 16384, "bf16") / 1e12 < 85  # published 80 TFLOP/s at 16k
    assert "FlashAttention Triton" in tri.attention_eff.source and tri.extra["attention_kernel"] == "flash_attn_triton"
    # a slower attention kernel makes a step slower and nothing else
    spec = preset("llama2-7b")
    lay = Layout(dp=8, micro_batch=1, sharding="full_shard", recompute="full")
    a = step_times(spec, a100, lay, global_batch=8, seq_len=8192)
    b = step_times(spec, tri, lay, global_batch=8, seq_len=8192)
    assert b.compute > a.compute and b.memory_bound == a.memory_bound


def test_validation_picks_the_attention_kernel_a_source_ran(cat):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    a100, h100 = calibrate(cat.get("a100-80gb-sxm")), calibrate(cat.get("h100-sxm"))
    lf = {"source": "https://github.com/mosaicml/llm-foundry/blob/main/scripts/train/benchmarking/README.md"}
    assert V.attention_kernel(lf, a100) == "flash_attn_triton"
    assert V.attention_kernel(lf, h100) == "flash_attn_1"  # no Triton curve published for H100
    assert V.attention_kernel({"source": "https://github.com/pytorch/torchtitan"}, h100) == "flash_attn_2"

    assert V.attention_core({"source": "Narayanan et al., SC21, arXiv:2104.04473"}) == "materialized"
    assert V.attention_core(lf) == "flash"


def _synthetic_logerr(V, best_eta: dict[str, float], n: dict[str, int], noise: float = 0.0, seed: int = 0):
    """Rows whose log error is log(best_eta / eta) at each grid point (comm_eff ignored): a family's own fit is its
    best_eta."""
    rng = np.random.default_rng(seed)
    fams, rows = [], []
    for f, e in best_eta.items():
        for _ in range(n[f]):
            fams.append(f)
            jitter = noise * rng.standard_normal()
            rows.append([math.log(e / g[0]) + jitter + 0.01 * (1 - g[1]) for g in V.GRID])
    return np.array(fams, dtype=object), np.array(rows)


def test_validation_family_fit_shrinks_towards_all_rows_and_never_sees_the_held_out_row():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    fams, le = _synthetic_logerr(V, {"a": 0.5, "b": 1.0, "c": 0.8}, {"a": 2, "b": 20, "c": 20}, noise=0.02)
    ab = np.abs(le)
    train = np.arange(len(fams))
    own = V.fit_families(train, fams, ab, 0.0)
    assert V.GRID[own["a"]][0] == pytest.approx(0.5, abs=0.03) and V.GRID[own["b"]][0] == pytest.approx(1.0, abs=0.03)
    strong = V.fit_families(train, fams, ab, 1e6)
    assert strong["a"] == strong["b"] == strong["c"]  # the all-rows fit
    # a family with no training row takes the all-rows fit, whatever k
    no_a = train[fams[train] != "a"]
    all_rows = int(np.argmin(ab[no_a].mean(axis=0)))
    assert V.fit_families(no_a, fams, ab, 0.0)["a"] == V.fit_families(no_a, fams, ab, 5.0)["a"] == all_rows
    # empirical Bayes: little within-family scatter against a wide between-family spread -> a weak prior
    k = V.shrinkage_k(train, fams, le)
    assert 0 < k < 0.1
    fams2, le2 = _synthetic_logerr(V, {"a": 0.5, "b": 1.0, "c": 0.8}, {"a": 2, "b": 20, "c": 20}, noise=0.3)
    assert V.shrinkage_k(train, fams2, le2) > 10 * k  # noisy rows: trust the families less
    # held out: moving one row's published figure never moves its own held-out prediction's fit
    preds = [{"fam": f} for f in fams]
    err, _ = V.held_out(preds, le, lambda p, i: i)
    le_moved = le.copy()
    le_moved[5] += 0.7  # row 5 published 2x slower
    err_moved, _ = V.held_out(preds, le_moved, lambda p, i: i)
    assert math.log1p(err_moved[5]) - math.log1p(err[5]) == pytest.approx(0.7, abs=1e-9)


def test_validation_comm_prior_keeps_the_calibrated_bandwidth_unless_the_rows_insist():
    """fit_cost adds COMM_PRIOR x |log comm_eff| per row: where comm_eff and overlap_cost explain the rows equally
    the fit keeps comm_eff = 1; a deficit only comm_eff explains still gets it; the score itself is untouched."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    g = np.array(V.GRID)
    # rows indifferent between comm_eff 0.35 (with overlap_cost 0.25) and comm_eff 1 (with overlap_cost 0.75)
    flat = np.abs(np.log(g[:, 0] / 0.9))[None, :].repeat(4, axis=0)
    tie = np.where((np.isclose(g[:, 1], 0.35) & np.isclose(g[:, 2], 0.25))
                   | (np.isclose(g[:, 1], 1.0) & np.isclose(g[:, 2], 0.75)), 0.0, 0.05)[None, :]
    le = flat + tie
    k = V.fit_eta(list(range(4)), le)
    assert V.GRID[k][1] == 1.0 and V.GRID[k][2] == 0.75 and V.GRID[k][0] == pytest.approx(0.9, abs=0.011)
    # rows that only comm_eff 0.18 explains (0.5 log error anywhere else) keep it
    insist = np.where(np.isclose(g[:, 1], 0.18), 0.0, 0.5)[None, :].repeat(4, axis=0) + flat
    assert V.GRID[V.fit_eta(list(range(4)), insist)][1] == 0.18
    assert np.allclose(V.fit_cost(le) - np.abs(le), V.COMM_PRIOR * np.abs(np.log(g[:, 1]))[None, :])


def test_validation_interval_coverage_uses_only_the_other_hardware():
    """The band a never-seen hardware would carry is the other hardware's q90, applied in log space as the
    predictor applies it; a hardware whose errors exceed the others' is under-covered, and it says so."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    preds = [{"hw": "a"}] * 10 + [{"hw": "b"}] * 10
    errs = np.array([0.05] * 10 + [0.5] * 10)
    ic = V.interval_coverage(preds, errs)
    assert ic["per_hardware"]["a"]["band_rel"] == pytest.approx(0.5) and ic["per_hardware"]["a"]["covered"] == 1.0
    assert ic["per_hardware"]["b"]["band_rel"] == pytest.approx(0.05) and ic["per_hardware"]["b"]["covered"] == 0.0
    assert ic["overall_covered"] == 0.5
    # log-symmetric: -0.30 is inside a +-0.45 band (1/1.45 = 0.69 < 0.70), +0.46 is not
    ic2 = V.interval_coverage([{"hw": "a"}, {"hw": "b"}, {"hw": "c"}], np.array([-0.30, 0.45, 0.45]))
    assert ic2["per_hardware"]["a"]["covered"] == 1.0


def test_prospective_coverage_counts_rows_inside_the_band_they_carried(tmp_path):
    """A prospective row is inside when its framework-unknown error lies in [1/(1+rel), 1+rel] of the published
    value, rel being its set's band for its hardware; a set/hardware without a band, or a malformed bands file, is
    an error naming it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    pro = {"s1": {"rows": {"a": {"framework_unknown": 0.19}, "b": {"framework_unknown": -0.17}}},
           "s2": {"rows": {"c": {"framework_unknown": 0.30}}}}
    hw = {"a": "h100-sxm", "b": "h100-sxm", "c": "b200"}
    bands = {("s1", "h100-sxm"): 0.20, ("s2", "b200"): 0.25}
    pc = V.prospective_coverage(pro, hw, bands)
    # +19% inside +-20%; -17% is 1/1.205 of the published value: outside (log-symmetric); +30% outside +-25%
    assert (pc["n"], pc["inside"]) == (3, 1) and pc["share"] == pytest.approx(1 / 3)
    assert pc["sets"]["s1"] == {"n": 2, "inside": 1, "misses": [{"row": "b", "error": -0.17, "band_rel": 0.20}]}
    assert [m["row"] for m in pc["sets"]["s2"]["misses"]] == ["c"]
    # a set read after the software-stack factor is counted with the error scored with it
    pro["s3"] = {"rows": {"d": {"framework_unknown": 0.5, "framework_unknown_stack": 0.05}},
                 "scored_with": "framework_unknown_stack"}
    pc3 = V.prospective_coverage(pro, {**hw, "d": "tpu-v5e"}, {**bands, ("s3", "tpu-v5e"): 0.10})
    assert pc3["sets"]["s3"] == {"n": 1, "inside": 1, "misses": []}
    with pytest.raises(ValueError, match="set 's2' and hardware 'b200'"):
        V.prospective_coverage(pro, hw, {("s1", "h100-sxm"): 0.2})
    bad = tmp_path / "bands.csv"
    bad.write_text("set,hardware,band_rel,source\ns1,h100-sxm,wide,x\n")
    with pytest.raises(ValueError, match="row 2"):
        V.load_bands(bad)
    # a set also predicted with the framework stated: its rows are counted again, apart, against the stated band
    # with their per-family error; sets without such a band are not
    pro4 = {"s4": {"rows": {"e": {"framework_unknown": 0.30, "per_family": 0.12},
                            "f": {"framework_unknown": 0.10, "per_family": 0.30}}}}
    hw4 = {"e": "gb200-nvl72", "f": "gb200-nvl72"}
    b4 = {("s4", "gb200-nvl72"): 0.40, ("s4", "gb200-nvl72", "megatron"): 0.25}
    pc4 = V.prospective_coverage(pro4, hw4, b4, fam_of={"e": "megatron", "f": "megatron"})
    assert pc4["sets"]["s4"]["inside"] == 2
    fs = pc4["framework_stated"]
    assert (fs["n"], fs["inside"]) == (2, 1) and fs["sets"]["s4"]["misses"] == [
        {"row": "f", "error": 0.30, "band_rel": 0.25}]
    assert fs["by_family"] == {"megatron": {"n": 2, "inside": 1}}  # the family's own record
    # the same stated rows framework unknown, against the framework-unknown band: +30% and +10% inside +-40%
    assert fs["framework_unknown"] == {"n": 2, "inside": 2}
    pc5 = V.prospective_coverage(pro4, hw4, {**b4, ("s4", "gb200-nvl72"): 0.2}, fam_of={"e": "megatron",
                                                                                      "f": "megatron"})
    assert pc5["framework_stated"]["framework_unknown"] == {"n": 2, "inside": 1}  # +30% outside +-20%
    assert V.prospective_coverage(pro4, hw4, b4)["framework_stated"]["n"] == 0  # no families: not counted
    other = V.prospective_coverage(pro4, hw4, b4, fam_of={"e": "maxtext", "f": "maxtext"})
    assert other["framework_stated"]["n"] == 0  # a band stated for another family is not this row's
    good = tmp_path / "bands2.csv"
    good.write_text("set,hardware,band_rel,source,framework\ns1,h100-sxm,0.3,x,\ns1,h100-sxm,0.2,y,megatron\n")
    assert V.load_bands(good) == {("s1", "h100-sxm"): 0.3, ("s1", "h100-sxm", "megatron"): 0.2}


def test_every_prospective_set_has_the_bands_its_rows_carried():
    """prospective_bands.csv holds, for each PROSPECTIVE set, a band for the hardware of each of its rows, each
    with the predictor_error.json entry it was read from."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    hw = {r["run_id"]: r["hardware"] for r in csv.DictReader(open(V.RUNS, newline=""))}
    bands = V.load_bands()
    for since, ids in V.PROSPECTIVE.items():
        for rid in ids:
            assert (since, hw[rid]) in bands, (since, rid)
    with open(V.BANDS, newline="") as f:
        for r in csv.DictReader(f):
            assert r["set"] in V.PROSPECTIVE and f"at commit {r['set']}" in r["source"] and 0 < float(r["band_rel"]) < 1


def test_never_seen_band_widens_until_held_out_types_are_covered():
    """The band of a hardware type without rows: the first quantile of the ladder whose leave-one-type-out band
    holds the level on average over types; with nothing reaching it, the last one, flagged as not met."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    rng = np.random.default_rng(0)
    # three types with different spreads: q90 of the others under-covers the widest type
    preds = [{"hw": h} for h in "abc" for _ in range(40)]
    errs = np.concatenate([rng.normal(0, s, 40) for s in (0.05, 0.07, 0.10)])
    nb = V.never_seen_band(preds, errs, level=0.9)
    assert nb["met"] and nb["coverage"]["mean_hardware_covered"] >= 0.9
    assert nb["quantile"] > 0.9 and nb["tried"][0]["mean_hardware_covered"] < 0.9
    # the least quantile of the ladder that holds the level: every rung tried before it fell short
    assert [t["quantile"] for t in nb["tried"]] == list(V.BAND_QUANTILES[:len(nb["tried"])])
    assert all(t["mean_hardware_covered"] < 0.9 for t in nb["tried"][:-1])
    assert nb["band_rel"] == pytest.approx(np.quantile(np.abs(errs), nb["quantile"]))
    far = V.never_seen_band([{"hw": "a"}] * 10 + [{"hw": "b"}] * 10, np.array([0.01] * 10 + [2.0] * 10))
    assert not far["met"] and far["quantile"] == V.BAND_QUANTILES[-1]


def test_known_hardware_band_counts_a_publication_once():
    """A hardware whose rows come from one tight publication and one loose one: the band built from the tight one
    alone (its own q90) misses the loose one held out, so the band pools the own quantile with the band of a type
    without rows, weighted by source groups, with the least (prior quantile, k) of the ladder that holds a held-out
    publication's rows at the level on average over publications; held-out bands never use the held-out rows."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    rng = np.random.default_rng(1)
    preds, errs = [], []
    for h, groups in (("a", (0.01, 0.20)), ("b", (0.15, 0.15)), ("c", (0.15, 0.15, 0.15))):
        for g, sd in enumerate(groups):
            preds += [{"hw": h, "source": f"{h}-src{g}"}] * 30
            errs += list(rng.normal(0, sd, 30))
    errs = np.array(errs)
    nb = V.never_seen_band(preds, errs)
    kb = V.known_hardware_band(preds, errs, nb)
    hc = kb["held_out_source_coverage"]
    assert kb["met"] and hc["mean_group_covered"] >= 0.9 and len(hc["groups"]) == 7
    assert kb["tried"][0]["mean_group_covered"] < 0.9  # own quantile alone (k = 0) under-covers
    # the tight publication of "a" held out: its band comes from the loose one only (and the others' prior)
    loose = next(g for g in hc["groups"] if g["source"] == "a-src0")
    own = np.quantile(np.abs(errs[30:60]), 0.9)
    prior = np.quantile(np.abs(errs[60:]), kb["prior_quantile"])
    assert loose["band_rel"] == pytest.approx(V._pooled_band(own, 1, prior, kb["k"]))
    a = kb["per_hardware"]["a"]
    assert a["source_groups"] == 2 and a["own_q"] == pytest.approx(np.quantile(np.abs(errs[:60]), 0.9))
    assert a["band_rel"] == pytest.approx(V._pooled_band(a["own_q"], 2, kb["prior_band_rel"], kb["k"]))
    assert kb["prior_band_rel"] == pytest.approx(np.quantile(np.abs(errs), kb["prior_quantile"]))
    assert V._pooled_band(0.1, 3, 0.3, 0.0) == pytest.approx(0.1) and V._pooled_band(0.1, 1, 0.3, 1.0) == \
        pytest.approx(math.sqrt(0.05))


def test_framework_stated_band_is_the_same_ladder_on_the_family_scored_errors():
    """framework_stated_band runs never_seen_band then known_hardware_band on the errors it is given (the
    leave-one-hardware-out errors with each family's factors): narrower errors give narrower bands, and the same
    errors the framework-unknown bands."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    rng = np.random.default_rng(2)
    preds, unknown = [], []
    for h in ("a", "b", "c"):
        for g in range(3):
            preds += [{"hw": h, "source": f"{h}-src{g}", "fam": "f"}] * 20
            unknown += list(rng.normal(0, 0.25, 20))
    unknown = np.array(unknown)
    stated = unknown * 0.5  # the family factors take half of each row's error away
    fs = V.framework_stated_band(preds, stated)
    nb = V.never_seen_band(preds, stated)
    assert fs["never_seen"] == nb and fs["known"] == V.known_hardware_band(preds, stated, nb)
    assert fs["per_family"] == V.family_band_ratio(preds, stated, fs["known"])
    wide = V.known_hardware_band(preds, unknown, V.never_seen_band(preds, unknown))
    assert fs["known"]["prior_band_rel"] < wide["prior_band_rel"]
    for h in ("a", "b", "c"):
        assert fs["known"]["per_hardware"][h]["band_rel"] < wide["per_hardware"][h]["band_rel"]


def test_family_band_ratio_widens_only_the_families_whose_factors_carry_badly():
    """family_band_ratio: a family's ratio is the q90 of its rows' |error| over their hardware's band, pooled with 1
    at the ladder's k and never below 1; a family erring as its hardware's band allows stays near 1 (its hardware's
    error is in that band already); with the ratio the held-out (hardware, source, family) groups are held at the
    level."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    rng = np.random.default_rng(5)
    preds, errs, groups = [], [], []
    for h in "abc":
        for fam, n_src, sd in (("calm", 4, 0.08), ("wild", 2, 0.4)):
            for g in range(n_src):
                preds += [{"hw": h, "source": f"{h}-{fam}{g}", "fam": fam}] * 10
                errs += list(rng.normal(0, sd, 10))
                groups.append({"hardware": h, "source": f"{h}-{fam}{g}", "band_rel": 0.2})
    errs = np.clip(np.array(errs), -0.9, None)
    known = {"prior_band_rel": 0.5, "per_hardware": {h: {"n": 60, "band_rel": 0.2} for h in "abc"},
             "held_out_source_coverage": {"groups": groups}}
    fr = V.family_band_ratio(preds, errs, known)
    assert fr["met"] and fr["k"] in V.KNOWN_BAND_K and fr["held_out_source_coverage"]["groups"] == 18
    assert fr["held_out_source_coverage"]["mean_group_covered"] >= 0.9
    assert fr["tried"][0]["k"] == 0.0
    wild = np.array([p["fam"] == "wild" for p in preds])
    calm, wi = fr["per_family"]["calm"], fr["per_family"]["wild"]
    assert wi["own_ratio"] == pytest.approx(np.quantile(np.abs(errs[wild]) / 0.2, 0.9))
    assert calm["own_ratio"] < 1.0 and calm["ratio"] == 1.0  # never narrowed
    assert wi["ratio"] == pytest.approx(V._family_ratio(wi["own_ratio"], 6, fr["k"])) and wi["ratio"] > 2.0
    assert wi["held_out_rows_covered"] >= 0.75 and calm["held_out_rows_covered"] >= 0.95
    # a family on one noisy hardware only, erring as its hardware's band allows, keeps a ratio near 1
    solo = [{"hw": "d", "source": f"d{g}", "fam": "solo"} for g in range(3) for _ in range(10)]
    e2 = np.clip(rng.normal(0, 0.3, 30), -0.9, None)
    k2 = {"prior_band_rel": 0.5, "per_hardware": {"d": {"n": 30, "band_rel": 0.5}},
          "held_out_source_coverage": {"groups": [{"hardware": "d", "source": f"d{g}", "band_rel": 0.5}
                                                  for g in range(3)]}}
    assert V.family_band_ratio(solo, e2, k2)["per_family"]["solo"]["ratio"] < 1.2
    assert V._family_ratio(0.5, 10, 0.0) == 1.0 and V._family_ratio(2.0, 1, 0.0) == pytest.approx(2.0)
    assert V._family_ratio(2.0, 1, 3.0) == pytest.approx(math.sqrt((4 + 3) / 4))


def test_stated_family_band_carries_the_family_ratio(tmp_path):
    """held_out_error with a stated family multiplies its hardware's stated band by the family's ratio above 1,
    saying so; a family at 1, an unmet ladder or a file without per_family leave the band as it was; a type without
    rows carries the larger of the stated prior times the ratio and the framework-unknown prior."""
    import json

    from hwmodels.predict.predictor import family_band_ratio, held_out_error, stated_prior_band

    kb = {"level": 0.9, "k": 16, "prior_quantile": 0.95, "prior_band_rel": 0.37,
          "per_hardware": {"b200": {"n": 40, "source_groups": 7, "own_q": 0.18, "band_rel": 0.33}}}
    fs = {"level": 0.9, "k": 8, "prior_quantile": 0.93, "prior_band_rel": 0.30,
          "per_hardware": {"b200": {"n": 40, "source_groups": 7, "own_q": 0.12, "band_rel": 0.19}}}
    per = {"level": 0.9, "k": 2.0, "met": True, "held_out_source_coverage": {"mean_group_covered": 0.91},
           "per_family": {"megatron": {"n": 300, "source_groups": 20, "own_q": 0.1, "own_ratio": 0.5, "ratio": 1.0},
                          "torchtitan": {"n": 30, "source_groups": 5, "own_q": 0.6, "own_ratio": 2.2,
                                         "ratio": 2.0}}}
    fam = {"framework_efficiency": {"eta": 0.8, "comm_eff": 1.0, "overlap_cost": 0.0, "per_family": {
        f: {"eta": 0.8, "comm_eff": 1.0, "overlap_cost": 0.0, "rows": 30} for f in ("megatron", "torchtitan")}}}
    p = tmp_path / "err.json"
    e = {**fam, "known_hardware_band": kb, "framework_stated_band": {"known": fs, "per_family": per}}
    p.write_text(json.dumps(e))
    rel, how = held_out_error("b200", p, "torchtitan")
    assert rel == pytest.approx(0.38) and "x2.00 for torchtitan" in how and "2.20" in how and "91%" in how
    rel, how = held_out_error("b200", p, "megatron")
    assert rel == pytest.approx(0.19) and "per_family" not in how
    assert family_band_ratio(e, "megatron") == (1.0, "") and family_band_ratio(e, None) == (1.0, "")
    assert stated_prior_band(e, "torchtitan") == pytest.approx(0.60)
    assert stated_prior_band(e, "megatron") == pytest.approx(0.37)  # the framework-unknown prior is wider
    rel, how = held_out_error("mi400", p, "torchtitan")
    assert rel == pytest.approx(0.60) and "times the family's ratio: +-60.0%" in how
    unmet = {**e, "framework_stated_band": {"known": fs, "per_family": {**per, "met": False}}}
    assert family_band_ratio(unmet, "torchtitan")[0] == 1.0
    assert family_band_ratio({**e, "framework_stated_band": {"known": fs}}, "torchtitan")[0] == 1.0


def test_interval_reads_the_known_hardware_band(tmp_path):
    """Where the validation file has known_hardware_band, a hardware with rows carries its pooled band and one with
    fewer rows (or none) the band of a type without rows, each saying where it came from."""
    import json

    from hwmodels.predict.predictor import held_out_error

    p = tmp_path / "err.json"
    p.write_text(json.dumps({
        "leave_one_hardware_out_stack": {"per_hardware": {"b200": {"q90": 0.05, "n": 40}}},
        "never_seen_band": {"level": 0.9, "quantile": 0.92, "band_rel": 0.27, "met": True},
        "known_hardware_band": {"level": 0.9, "k": 16, "prior_quantile": 0.95, "prior_band_rel": 0.37,
                                "held_out_source_coverage": {"mean_group_covered": 0.91},
                                "per_hardware": {"b200": {"n": 40, "source_groups": 7, "own_q": 0.18,
                                                          "band_rel": 0.33},
                                                 "mi300x": {"n": 4, "source_groups": 1, "own_q": 0.05,
                                                            "band_rel": 0.37}}}}))
    rel, how = held_out_error("b200", p)
    assert rel == pytest.approx(0.33) and "known_hardware_band" in how and "7 sources" in how and "91%" in how
    for hw in ("mi300x", "tpu-v7"):
        rel, how = held_out_error(hw, p)
        assert rel == pytest.approx(0.37) and "q95" in how and "fewer than 5" in how


def test_stated_framework_reads_the_framework_stated_band(tmp_path):
    """A stated framework family reads framework_stated_band (its own bands), and falls back to the
    framework-unknown band, saying so, where the file has none; families with fewer than
    MIN_STATED_FAMILY_ROWS rows and "other" are not offered; an unknown family is an input error naming the
    choices."""
    import json

    from hwmodels.errors import ModelInputError
    from hwmodels.predict.predictor import check_framework, framework_families, framework_factors, held_out_error

    kb = {"level": 0.9, "k": 16, "prior_quantile": 0.95, "prior_band_rel": 0.37,
          "per_hardware": {"b200": {"n": 40, "source_groups": 7, "own_q": 0.18, "band_rel": 0.33}}}
    fs = {"level": 0.9, "k": 8, "prior_quantile": 0.93, "prior_band_rel": 0.22,
          "per_hardware": {"b200": {"n": 40, "source_groups": 7, "own_q": 0.12, "band_rel": 0.19}}}
    fam = {"framework_efficiency": {"eta": 0.8, "comm_eff": 1.0, "overlap_cost": 0.25, "per_family": {
        "megatron": {"eta": 0.84, "comm_eff": 1.0, "overlap_cost": 0.25, "rows": 300},
        "tiny": {"eta": 1.2, "comm_eff": 1.0, "overlap_cost": 0.0, "rows": 2},
        "other": {"eta": 0.9, "comm_eff": 1.0, "overlap_cost": 0.0, "rows": 12}}}}
    p = tmp_path / "err.json"
    p.write_text(json.dumps({**fam, "known_hardware_band": kb, "framework_stated_band": {"known": fs}}))
    assert framework_families(p) == ("megatron",)
    assert held_out_error("b200", p)[0] == pytest.approx(0.33)
    rel, how = held_out_error("b200", p, "megatron")
    assert rel == pytest.approx(0.19) and "framework_stated_band" in how and "pre-registered" not in how
    # a type without rows: the framework narrows the framework part of the error only, so its band is not
    # narrower than the framework-unknown band of a type without rows
    rel, how = held_out_error("mi400", p, "megatron")
    assert rel == pytest.approx(0.37) and "not narrower than the framework-unknown band" in how
    assert held_out_error("mi400", p)[0] == pytest.approx(0.37)
    wide = tmp_path / "wide.json"  # where the stated prior is the wider one, it stands
    wide.write_text(json.dumps({**fam, "known_hardware_band": kb,
                                "framework_stated_band": {"known": {**fs, "prior_band_rel": 0.45}}}))
    assert held_out_error("mi400", wide, "megatron")[0] == pytest.approx(0.45)
    # with pre-registered sets read this way, the interval says how the band held on them
    pro = tmp_path / "pro.json"
    pro.write_text(json.dumps({**fam, "known_hardware_band": kb, "framework_stated_band": {"known": fs},
                               "prospective_coverage": {"framework_stated": {"n": 27, "inside": 20}}}))
    how = held_out_error("b200", pro, "megatron")[1]
    assert "of 27 published runs predicted this way before they were read, 20 fell inside, 74%" in how
    assert "that stated megatron" not in how  # no per-family record in the file: none said
    fam_pro = tmp_path / "fam_pro.json"  # ... and the stated family's own record, where the file has it
    fam_pro.write_text(json.dumps({**fam, "known_hardware_band": kb, "framework_stated_band": {"known": fs},
                                   "prospective_coverage": {"framework_stated": {
                                       "n": 27, "inside": 20, "by_family": {"megatron": {"n": 10, "inside": 9}}}}}))
    assert "claimed; 9 of the 10 that stated megatron)" in held_out_error("b200", fam_pro, "megatron")[1]
    assert "pre-registered" not in held_out_error("b200", pro)[1]  # the framework-unknown band: its own record
    assert framework_factors(path=p, framework="megatron").eta == pytest.approx(0.84)
    assert framework_factors(path=p).eta == pytest.approx(0.8)
    assert check_framework("unknown", p) is None and check_framework(None, p) is None
    for bad in ("tiny", "other", "jax"):
        with pytest.raises(ModelInputError, match="valid choices: unknown, megatron"):
            check_framework(bad, p)
    q = tmp_path / "old.json"
    q.write_text(json.dumps({**fam, "known_hardware_band": kb}))
    rel, how = held_out_error("b200", q, "megatron")
    assert rel == pytest.approx(0.33) and "no framework_stated_band" in how


def test_stack_factor_is_fitted_on_the_other_hardware_of_the_stack_only():
    """Held out, a hardware's stack factor is the shrunk median error of the OTHER hardware of its stack, at the
    fit of the other hardware; another stack's rows do not move it, and a hardware alone in its stack keeps its
    framework-unknown error."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    preds = [{"hw": h} for h in ("a",) * 4 + ("b",) * 6 + ("c",) * 5]
    g = len(V.GRID)
    # every grid point scores the same, so the fit is the first point whatever the split
    off = np.array([0.10] * 4 + [0.20, 0.20, 0.30, 0.30, 0.30, 0.40] + [-0.5] * 5)
    logerr = np.repeat(off[:, None], g, axis=1)
    stacks = {"a": "s1", "b": "s1", "c": "s2"}
    errs, shifts = V.held_out_stack(preds, logerr, stacks)
    b_shift = 0.30 * 6 / (6 + V.STACK_PRIOR_ROWS)  # median of b's rows, shrunk
    assert shifts["a"]["s1"]["shift_log"] == pytest.approx(b_shift) and shifts["a"]["s1"]["from_hardware"] == ["b"]
    assert errs[:4] == pytest.approx(np.exp(0.10 - b_shift) - 1.0)
    assert shifts["b"]["s1"]["shift_log"] == pytest.approx(0.10 * 4 / (4 + V.STACK_PRIOR_ROWS))
    assert shifts["c"] == {"s2": {"shift_log": 0.0, "rows": 0, "from_hardware": []}}
    assert errs[-5:] == pytest.approx(np.exp(-0.5) - 1.0)
    assert V.stack_shift(np.array([], dtype=int), logerr, 0) == 0.0
    # another split (a prospective set: rows 0-1 of a and row 4 of b held out): each held-out row takes the factor
    # of its stack's rows outside the split, its own hardware's included
    held = {0, 1, 4}
    errs2, shifts2 = V.held_out_stack(preds, logerr, stacks, lambda p, i: i in held)
    rest = [0.10, 0.10] + [0.20, 0.30, 0.30, 0.30, 0.40]  # s1 rows outside the split
    c = float(np.median(rest)) * len(rest) / (len(rest) + V.STACK_PRIOR_ROWS)
    assert shifts2[True]["s1"]["shift_log"] == pytest.approx(c) and shifts2[True]["s1"]["rows"] == 7
    assert errs2[[0, 1, 4]] == pytest.approx(np.exp(off[[0, 1, 4]] - c) - 1.0)


def test_prediction_carries_its_software_stack_factor(tmp_path, a100):
    """The validation's factor for the node's stack multiplies the step time and every part of the breakdown
    alike, and the calibration says where it came from; a stack the file does not list is x1."""
    import json

    from hwmodels.predict.predictor import stack_factor

    p = tmp_path / "err.json"
    p.write_text(json.dumps({"software_stack_factor": {"per_stack": {
        "cuda": {"time_factor": 1.25, "rows": 7, "hardware": ["h100-sxm"]}}}}))
    s = preset("llama2-7b")
    lay = Layout(dp=8, micro_batch=1, sharding="zero1", recompute="none")
    assert a100.software_stack == "cuda"
    base = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=8, global_batch=64, error_path=p,
                           stack=1.0)
    pr = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=8, global_batch=64, error_path=p)
    assert pr.step_time_s == pytest.approx(1.25 * base.step_time_s)
    assert pr.tokens_per_s == pytest.approx(base.tokens_per_s / 1.25) and pr.mfu == pytest.approx(base.mfu / 1.25)
    assert sum(pr.breakdown_s.values()) == pytest.approx(pr.step_time_s)
    assert all(pr.breakdown_s[k] == pytest.approx(1.25 * v) for k, v in base.breakdown_s.items())
    assert "x1.250" in pr.calibration["software_stack"] and "7 published runs on h100-sxm" in \
        pr.calibration["software_stack"]
    assert "mostly that framework" not in pr.calibration["software_stack"]
    p.write_text(json.dumps({"software_stack_factor": {"per_stack": {
        "xla-tpu": {"time_factor": 0.9, "rows": 46, "hardware": ["tpu-v5e"], "families": {"maxtext": 42, "x": 4}}}}}))
    stack_factor.__globals__["_errors"].cache_clear()
    assert "maxtext ran 91% of them" in stack_factor("xla-tpu", p)[1]
    assert stack_factor("rocm", p)[0] == 1.0 and "no stack factor" in stack_factor("rocm", p)[1]
    assert stack_factor("", p)[0] == 1.0


def test_interval_prefers_the_stack_factor_error(tmp_path):
    """New predictions carry the stack factor, so their interval is the held-out error scored with it."""
    import json

    from hwmodels.predict.predictor import held_out_error

    p = tmp_path / "err.json"
    p.write_text(json.dumps({
        "leave_one_hardware_out_any_framework": {"per_hardware": {"b200": {"q90": 0.2, "n": 9}}},
        "leave_one_hardware_out_stack": {"per_hardware": {"b200": {"q90": 0.15, "n": 9}}}}))
    rel, how = held_out_error("b200", p)
    assert rel == pytest.approx(0.15) and "stack factor" in how


def test_axlearn_remat_policy_is_priced_from_the_policy_the_row_names(a100):
    """AXLearn's save_only_these_names (attention projections and context saved) recomputes the feed-forward block:
    full recomputation of the FFN's share of the layer's matmul FLOPs; dots_saveable saves every matmul output."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    s = preset("llama2-7b")
    d, f = s.d_model, s.ffn_dim
    assert V.ffn_share(s) == pytest.approx(3 * d * f / (4 * d * d + 3 * d * f))
    lay = Layout(dp=64, micro_batch=1, sharding="full_shard", recompute="selective")
    row = {"framework": "AXLearn (JAX/XLA)", "source_detail": "policy save_only_these_names(q_proj, context)"}
    got, how = V.framework_selective(s, a100, lay, row, 64, "flash")
    assert got.recompute == "full" and got.recompute_layers == pytest.approx(round(V.ffn_share(s), 3))
    assert "feed-forward block recomputed" in how
    got, how = V.framework_selective(s, a100, lay, {**row, "source_detail": "RematSpec policy dots_saveable"}, 64,
                                     "flash")
    assert got.recompute == "selective" and got.selective_saves == "dots" and "dots_saveable" in how
    assert V.family("AXLearn (JAX/XLA), apple/axlearn") == "axlearn"
    assert V.family("torchprime (PyTorch/XLA SPMD, torch_xla nightly)") == "torchprime"
    assert V.family("nanotron") == "nanotron"  # set 38: its own family, as torchprime (it moved the catch-all)


def test_selective_that_keeps_only_matmul_outputs():
    """selective_saves="dots" (MaxText remat_policy=minimal): 2 bytes x (q + 2 d_kv + f) per token split over TP,
    2 bytes x 3 h (attention output projection, MLP output, layer input) split only with SP; below Korthikanti's
    selective; wired through Layout and the memory estimate."""
    spec = parse_spec("d_model=1024,n_layers=4,n_heads=8,vocab=1000,ffn_dim=4096")
    kw = dict(micro_batch=2, seq_len=128, tp=2, recompute="selective")
    assert activation_bytes_per_layer(spec, sp=True, saves="dots", **kw) == (14336 / 2 + 6144 / 2) * 256
    assert activation_bytes_per_layer(spec, sp=False, saves="dots", **kw) == (14336 / 2 + 6144) * 256
    assert activation_bytes_per_layer(spec, sp=True, saves="dots", **kw) < activation_bytes_per_layer(spec, sp=True,
                                                                                                      **kw)
    glu = parse_spec("d_model=1024,n_layers=4,n_heads=8,vocab=1000,ffn_dim=4096,glu=true")
    assert activation_bytes_per_layer(glu, sp=True, saves="dots", **kw) == (2 * (3072 + 8192) / 2 + 3072) * 256
    base = Layout(dp=1, tp=2, micro_batch=2, sharding="none", recompute="selective", sequence_parallel=True)
    cal = calibrate(default_catalog().get("tpu-v5p"))
    m_k = step_times(spec, cal, base, global_batch=2, seq_len=128, memory_only=True).memory
    m_d = step_times(spec, cal, replace(base, selective_saves="dots"), global_batch=2, seq_len=128,
                     memory_only=True).memory
    assert m_d.activations < m_k.activations and m_d.weights == m_k.weights
    with pytest.raises(ModelInputError, match="layout.selective_saves"):
        Layout(dp=1, selective_saves="some")


def test_validation_scores_memory_on_the_least_memory_layout_when_nothing_fits(cat):
    """A published run whose stated fields fit no layout of the memory model is a memory miss scored on the
    least-memory layout (the method the validation file states), while its step time is predicted on the fastest
    layout ignoring memory."""
    import csv

    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    with open(V.RUNS, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["run_id"] == "llama3-paper-405b-g8192"]
    [p], skipped = V.prepare(rows, cat)
    assert not skipped and not p["fits"]
    fastest = step_times(p["spec"], p["cal"], p["layout"], global_batch=p["gb"], memory_only=True).memory
    assert p["mem_GiB"] < fastest.total / 2**30 and p["mem_GiB"] < 1.2 * p["cap_GiB"]


# ------------------------------------------------------------------------------- fp8
def test_fp8_cast_bytes_are_hand_counted():
    """Delayed scaling (TE): 4 B per element of X in every forward and of G in every backward, of W once per step
    (TE's weight workspace); dynamic (torchao): 6 B, W in every forward."""
    s = parse_spec("d_model=1024,n_layers=1,n_heads=8,ffn_dim=4096,glu=false,vocab=1000")
    t, d, f = 2 * 512, 1024, 4096
    x = t * d + t * d + t * d + t * f  # inputs of qkv, attn_out, up, down
    w = d * 3 * d + d * d + d * f + f * d
    g = t * 3 * d + t * d + t * f + t * d
    for recipe, per_el, launches, per_mb in (("delayed", 4.0, 1, x), ("dynamic", 6.0, 2, x + w)):
        ops = O.layer_ops(s, micro_batch=2, seq_len=512, precision="fp8", fp8_recipe=recipe, recompute="full")
        casts = {o.phase: o for o in ops if o.name.startswith("fp8_cast")}
        assert casts["fwd"].nbytes == per_el * per_mb and casts["recompute"].nbytes == per_el * per_mb
        assert casts["bwd"].nbytes == per_el * g
        fwd_launches = (4 if recipe == "delayed" else 8) * launches
        assert casts["fwd"].launches == fwd_launches and casts["bwd"].launches == 4 * launches
        wc = O.weight_cast_op(s, precision="fp8", recipe=recipe)
        assert (wc is None) if recipe == "dynamic" else (wc.phase == "step" and wc.nbytes == per_el * w
                                                         and wc.launches == 4 * launches)
    assert O.weight_cast_op(s, tp=2, precision="fp8").nbytes == 4.0 * w / 2
    assert O.weight_cast_op(s, precision="bf16") is None
    assert not [o for o in O.layer_ops(s, micro_batch=2, seq_len=512, precision="bf16") if "fp8" in o.name]
    # the LM head and the attention core are not cast (they stay in 16 bits)
    assert not [o for o in O.head_ops(s, micro_batch=2, seq_len=512, precision="fp8") if "fp8" in o.name]
    with pytest.raises(ModelInputError, match="delayed"):
        O.layer_ops(s, micro_batch=1, seq_len=512, precision="fp8", fp8_recipe="blockwise")


def test_fp4_runs_the_fp8_linears_narrower_with_nvfp4_casts(cat):
    """fp4 (NVFP4 block scaling): the same GEMMs as fp8 at the fp4 peak and 0.5 + 1/16 bytes per input element, the
    casts at 7.125 B and 3 launches per element of X and W (forward) and G (backward), the head and the attention in
    16 bits; the matmul ceiling is the bf16 fraction x 0.85, labelled, with a wider sigma than fp8's; hardware
    without an fp4 peak refuses it."""
    from hwmodels.predict.calibration import K_HALF, k_half

    s = parse_spec("d_model=1024,n_layers=1,n_heads=8,ffn_dim=4096,glu=false,vocab=1000")
    t, d, f = 2 * 512, 1024, 4096
    x = t * d + t * d + t * d + t * f
    w = d * 3 * d + d * d + d * f + f * d
    g = t * 3 * d + t * d + t * f + t * d
    casts = {o.phase: o for o in O.layer_ops(s, micro_batch=2, seq_len=512, precision="fp4") if "cast" in o.name}
    assert set(casts) == {"fwd", "bwd"} and all(o.name.startswith("fp4_cast") for o in casts.values())
    assert casts["fwd"].nbytes == 7.125 * x and casts["bwd"].nbytes == 7.125 * g
    assert casts["fwd"].launches == 4 * 3 and casts["bwd"].launches == 4 * 3
    assert O.weight_cast_op(s, precision="fp4").nbytes == 7.125 * w  # once per step (TE's weight workspace)
    assert O.NARROW_GEMM_BYTES["fp4"] == 0.5625
    b200 = calibrate(cat.get("b200"))
    assert k_half(b200.peak, "fp4") == pytest.approx(K_HALF * b200.peak["fp4"] / b200.peak["bf16"])
    e4, e8, e16 = (b200.matmul_eff_max[dt] for dt in ("fp4", "fp8", "bf16"))
    assert e4.value == pytest.approx(0.85 * e16.value) and "fp4 = 0.85 x the bf16 fraction" in e4.source
    assert e4.rel_sigma > e8.rel_sigma >= e16.rel_sigma
    spec = preset("llama3-8b")
    lay = {p: Layout(dp=8, micro_batch=2, sharding="zero1", recompute="none", precision=p) for p in ("fp8", "fp4")}
    st = {p: step_times(spec, b200, lay[p], global_batch=32) for p in lay}
    # the linears get faster, the 16-bit attention, head and memory-bound work do not: faster, but not 2x
    assert st["fp8"].total / 2 < st["fp4"].total < st["fp8"].total
    with pytest.raises(ModelInputError, match="h100-sxm has no fp4 rate"):
        predict_job(hardware=cat.get("h100-sxm"), accelerators=8, model="llama3-8b", precision="fp4")


@pytest.mark.parametrize("precision", ["bf16", "fp8", "fp4"])
def test_sequence_parallel_gathers_travel_in_the_gemm_input_type(precision):
    """With SP, each layer's all-gathers (the norm output forward, the output gradient backward, again in a full
    recompute) carry the GEMM input type (TE's quantized gather_along_first_dim; 16-bit in bf16); the
    reduce-scatters of the 16-bit GEMM outputs stay 2 B per element."""
    s = parse_spec("d_model=1024,n_layers=1,n_heads=8,ffn_dim=4096,glu=false,vocab=1000")
    t, d = 2 * 512, 1024
    ops = O.layer_ops(s, micro_batch=2, seq_len=512, tp=4, sp=True, precision=precision, recompute="full")
    ag = [o for o in ops if o.collective == "all_gather"]
    rs = [o for o in ops if o.collective == "reduce_scatter"]
    assert len(ag) == len(rs) == 6
    assert {o.nbytes for o in ag} == {t * d * {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5625}[precision]}
    assert {o.nbytes for o in rs} == {t * d * 2.0}
    no_sp = [o for o in O.layer_ops(s, micro_batch=2, seq_len=512, tp=4, precision=precision) if o.group == "tp"]
    assert {o.collective for o in no_sp} == {"all_reduce"} and {o.nbytes for o in no_sp} == {t * d * 2.0}


def test_weight_casts_are_paid_once_per_step(cat, monkeypatch):
    """Under TE's fp8 recipe a step's memory-bound time carries each local layer's weight casts once, not per
    micro-batch: a second micro-batch adds the same time with or without them, and the step's fixed part (2 x one
    micro-batch - two) grows by the stage's layers x the weight-cast time."""
    h100 = calibrate(cat.get("h100-sxm"))
    spec = preset("llama3-8b")
    lay = Layout(dp=2, tp=4, micro_batch=1, sharding="zero1", recompute="none", precision="fp8",
                 sequence_parallel=True)

    def mem(n):
        return step_times(spec, h100, lay, global_batch=n).memory_bound

    with_w = (mem(2), mem(4))
    wc = O.weight_cast_op(spec, tp=4, precision="fp8")
    monkeypatch.setattr(O, "weight_cast_op", lambda *a, **k: None)
    without = (mem(2), mem(4))
    assert with_w[1] - with_w[0] == pytest.approx(without[1] - without[0])  # per micro-batch: no weight cast
    fixed = [2 * a - b for a, b in (with_w, without)]
    assert fixed[0] - fixed[1] == pytest.approx(spec.n_layers * h100.memory_time(wc.nbytes, wc.launches))
    assert fixed[0] - fixed[1] > 0.01 * with_w[0]


def test_fp8_gemm_small_k_falloff_scales_with_kernel_time(cat):
    """fp8 runs the k loop at twice the bf16 rate on H100, so its K_HALF is 2 x 64 = 128 (fixed C store/prologue)."""
    from hwmodels.predict.calibration import K_HALF, k_half
    h100 = calibrate(cat.get("h100-sxm"))
    assert k_half(h100.peak, "bf16") == K_HALF == 64.0
    assert k_half(h100.peak, "fp8") == pytest.approx(K_HALF * h100.peak["fp8"] / h100.peak["bf16"]) == \
        pytest.approx(128.0, rel=0.01)
    big, small = (8192, 8192, 8192), (8192, 8192, 256)
    r16 = h100.gemm_eff(*small, "bf16") / h100.gemm_eff(*big, "bf16")
    r8 = h100.gemm_eff(*small, "fp8") / h100.gemm_eff(*big, "fp8")
    assert r16 == pytest.approx((256 / (256 + 64)) / (8192 / (8192 + 64)))
    assert r8 == pytest.approx((256 / (256 + 128)) / (8192 / (8192 + 128)), rel=0.01)


# ------------------------------------------------------------------------------- partial recomputation
def test_recompute_of_a_share_of_the_layers_blends_memory_flops_and_time(a100):
    """Block-level checkpointing of a share r of the layers: activations, recomputed FLOPs and the recompute
    time are r x full + (1 - r) x none."""
    s = preset("llama2-13b")
    kw = dict(capacity_bytes=a100.memory_capacity_bytes, precision="bf16", sharding="full_shard", dp=64, tp=1,
              pp=1, micro_batch=2, seq_len=4096, sp=False)
    none, full = estimate(s, recompute="none", **kw), estimate(s, recompute="full", **kw)
    part = estimate(s, recompute="full", recompute_layers=0.25, **kw)
    logits = 4.0 * 4096 * 2 * s.vocab
    extra = full.activations - logits - 2.0 * 4096 * 2 * s.d_model * s.n_layers  # the one layer being recomputed
    assert part.activations - logits == pytest.approx(0.25 * (full.activations - logits - extra)
                                                      + 0.75 * (none.activations - logits) + extra)
    m, hw_full = O.step_flops(s, seq_len=4096, sequences=1, recompute="full")
    _, hw_part = O.step_flops(s, seq_len=4096, sequences=1, recompute="full", recompute_layers=0.25)
    assert hw_part - m == pytest.approx(0.25 * (hw_full - m))
    lay = Layout(dp=64, micro_batch=2, sharding="full_shard", recompute="none")
    t = {r: step_times(s, a100, replace(lay, recompute="full" if r else "none", recompute_layers=r or 1.0),
                       global_batch=128).compute for r in (0, 0.25, 1.0)}
    assert t[0.25] - t[0] == pytest.approx(0.25 * (t[1.0] - t[0]), rel=1e-9)
    with pytest.raises(ModelInputError, match="recompute_layers"):
        Layout(dp=1, recompute="full", recompute_layers=0.0)


def test_a_searched_layout_carries_the_searchs_held_out_optimism(cat, tmp_path):
    """A layout chosen by the search says how far searched predictions were above the published runs in the
    validation (by_layout_source); a fixed layout, or a file without that section, says nothing of it."""
    import json

    err = tmp_path / "err.json"
    err.write_text(json.dumps({"by_layout_source": {"stated": {"n": 10, "mean_signed": -0.01},
                                                    "searched": {"n": 4, "mean_signed": 0.07},
                                                    "searched_median_signed": 0.083}}))
    node = cat.get("h100-sxm")
    cal = calibrate(node)
    res = search(preset("llama2-7b"), cal, hardware=node.id, accelerators=16, global_batch=64, top=2, error_path=err)
    for p in (res.best, *res.runners_up):
        assert any("a median +8.3% from the published throughput" in n and "4 published runs" in n for n in p.notes)
    fixed = make_prediction(preset("llama2-7b"), cal, res.best.layout, hardware=node.id, accelerators=16,
                            global_batch=64, error_path=err)
    assert not any("search" in n for n in fixed.notes)
    bare = tmp_path / "bare.json"
    bare.write_text("{}")
    res2 = search(preset("llama2-7b"), cal, hardware=node.id, accelerators=16, global_batch=64, error_path=bare)
    assert not any("search" in n for n in res2.best.notes)


def test_search_recomputes_only_the_share_of_layers_memory_needs(cat):
    """A job where no recomputation does not fit but full recomputation of every layer is not needed: the
    search returns a share of the layers, the fastest layout that fits."""
    from hwmodels.predict.search import search

    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama3-8b").with_seq_len(8192)
    res = search(s, cal, hardware="h100-sxm", accelerators=8, global_batch=16, micro_batch=2,
                 sharding="full_shard", tp=1, pp=1, top=3, cp=1)
    best = res.best.layout
    assert res.best.fits and best.recompute == "full" and 0 < best.recompute_layers < 1
    assert all(p.fits for p in (res.best, *res.runners_up))
    # compared at the same factors (the search's prediction also carries the validation's framework and stack
    # factors, which move with the published rows): recomputing the share is faster than recomputing every layer
    share = step_times(s, cal, best, global_batch=16)
    all_layers = step_times(s, cal, replace(best, recompute_layers=1.0), global_batch=16)
    assert share.total < all_layers.total and share.memory.fits
    # the user's explicit choice is honoured: every layer
    fixed = search(s, cal, hardware="h100-sxm", accelerators=8, global_batch=16, micro_batch=2,
                   sharding="full_shard", tp=1, pp=1, recompute="full", top=1)
    assert fixed.best.layout.recompute_layers == 1.0


def test_overlap_cost_prices_the_hidden_collective_time(cat):
    """overlap_cost = g adds g x the DP/FSDP collective time hidden under compute: 0 is ideal hiding, 1 pays every
    collective in full (exposed = all communication); TP traffic is exposed either way."""
    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama2-13b")
    lay = Layout(dp=64, micro_batch=2, sharding="full_shard", recompute="none")
    base = step_times(s, cal, lay, global_batch=128)
    assert base.overlapped_comm > 0.5 * base.comm_total  # FSDP across nodes: mostly hidden at overlap_cost 0
    for g in (0.25, 0.75):
        st = step_times(s, cal, lay, global_batch=128, overlap_cost=g)
        assert st.total == pytest.approx(base.total + g * base.overlapped_comm)
        assert st.compute == base.compute and st.comm_total == base.comm_total
    none = step_times(s, cal, lay, global_batch=128, overlap_cost=1.0)
    assert none.exposed_comm == pytest.approx(none.comm_total)
    tp = step_times(s, cal, Layout(dp=1, tp=8, micro_batch=2, sharding="none", recompute="none"), global_batch=16)
    assert tp.overlapped_comm == 0.0 and tp.exposed_comm == pytest.approx(tp.comm_total)
    for bad in (-0.1, 1.5):
        with pytest.raises(ModelInputError, match="overlap_cost"):
            step_times(s, cal, lay, global_batch=128, overlap_cost=bad)


def test_tp_comm_overlap_hides_tp_traffic_under_the_layer_gemms(cat):
    """With tp_comm_overlap the TP collectives run under the layer's GEMMs: exposed only beyond them (at least 5%),
    the hidden part priced by overlap_cost; comm_total is the same traffic either way."""
    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama2-70b")
    base = Layout(dp=1, tp=8, micro_batch=1, sharding="none", recompute="none", sequence_parallel=True)
    off = step_times(s, cal, base, global_batch=8)
    on = step_times(s, cal, replace(base, tp_comm_overlap=True), global_batch=8)
    assert on.comm_total == pytest.approx(off.comm_total) and on.compute == off.compute
    assert off.overlapped_comm == 0.0 and off.exposed_comm == pytest.approx(off.comm_total)
    assert 0.05 * off.comm_total * 0.99 <= on.exposed_comm < 0.5 * off.exposed_comm
    assert on.overlapped_comm == pytest.approx(off.comm_total - on.exposed_comm)
    paid = step_times(s, cal, replace(base, tp_comm_overlap=True), global_batch=8, overlap_cost=1.0)
    assert paid.total == pytest.approx(off.total)  # paying every hidden second is no overlap at all
    # a search told the framework overlaps TP returns layouts that do
    res = search(preset("llama2-13b"), cal, hardware="h100-sxm", accelerators=8, global_batch=8, tp=8, top=1,
                 tp_comm_overlap=True, eta=1.0, comm_eff=1.0, overlap_cost=0.0)
    assert res.best.layout.tp_comm_overlap and res.best.layout.to_dict()["tp_comm_overlap"] is True


def test_serial_gradient_reduce_is_exposed(cat):
    """dp_comm_overlap off (Megatron-LM before --overlap-grad-reduce): the DDP gradient all-reduce runs after the
    backward pass, all of it on the critical path."""
    cal = calibrate(cat.get("a100-80gb-sxm"))
    s = preset("llama2-7b")
    lay = Layout(dp=64, micro_batch=1, sharding="ddp", recompute="none")
    on = step_times(s, cal, lay, global_batch=64)
    off = step_times(s, cal, replace(lay, dp_comm_overlap=False), global_batch=64)
    assert off.comm_total == pytest.approx(on.comm_total)
    assert off.exposed_comm == pytest.approx(off.comm_total) and off.overlapped_comm == 0.0
    assert on.overlapped_comm > 0.25 * on.comm_total
    assert on.exposed_comm + on.overlapped_comm == pytest.approx(off.exposed_comm)
    with pytest.raises(ModelInputError, match="layout.dp_comm_overlap"):
        Layout(dp=2, dp_comm_overlap="no")


def test_interleaved_chunks_give_the_gradient_reduction_a_longer_window(cat):
    """With v interleaved chunks a stage's gradient reduction starts as each chunk's last backward ends: it hides
    under (v-1)/v x min(pp, m) + 1/v micro-batch backward passes, not only the last one (1 without interleaving)."""
    from hwmodels.predict.predictor import _grad_window_mbs

    assert _grad_window_mbs(1, 1, 8) == 1.0 and _grad_window_mbs(4, 1, 8) == 1.0
    assert _grad_window_mbs(4, 2, 8) == pytest.approx(0.5 * 4 + 0.5)
    assert _grad_window_mbs(4, 12, 2) == pytest.approx(11 / 12 * 2 + 1 / 12)  # fewer micro-batches than stages
    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama2-70b")
    base = Layout(dp=8, tp=8, pp=4, micro_batch=1, sharding="zero1", recompute="none", sequence_parallel=True)
    kw = dict(global_batch=64)
    plain, inter = step_times(s, cal, base, **kw), step_times(s, cal, replace(base, interleave=5), **kw)
    serial = step_times(s, cal, replace(base, interleave=5, dp_comm_overlap=False), **kw)
    # more of the same gradient reduction hidden with chunks; none when it runs after the backward
    assert inter.overlapped_comm > plain.overlapped_comm > 0.0
    assert serial.overlapped_comm == 0.0


def test_the_fitted_overlap_cost_reaches_predictions(tmp_path, cat):
    """A validation file's overlap_cost prices new predictions and is named in their calibration; a file written
    before it existed means ideal overlap (0)."""
    import json

    from hwmodels.predict.predictor import framework_eta

    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps({"framework_efficiency": {"eta": 0.8, "comm_eff": 1.0}}))
    new.write_text(json.dumps({"framework_efficiency": {"eta": 0.8, "comm_eff": 1.0, "overlap_cost": 0.5,
                                                        "per_family": {"a": {"eta": 0.9, "comm_eff": 1.0}}}}))
    assert framework_eta(old).overlap_cost == 0.0 and framework_eta(new).overlap_cost == 0.5
    assert framework_eta(new, family="a").overlap_cost == 0.0  # the family's own fit, written without it
    cal = calibrate(cat.get("h100-sxm"))
    lay = Layout(dp=64, micro_batch=2, sharding="full_shard", recompute="none")
    kw = dict(hardware="h100-sxm", accelerators=64, global_batch=128)
    p_old = make_prediction(preset("llama2-13b"), cal, lay, error_path=old, **kw)
    p_new = make_prediction(preset("llama2-13b"), cal, lay, error_path=new, **kw)
    assert p_new.step_time_s > p_old.step_time_s
    assert "overlap_cost = 0.50" in p_new.calibration["framework_efficiency"]
    mixed = make_prediction(preset("llama2-13b"), cal, lay, error_path=new, overlap_cost=0.0, **kw)
    assert mixed.step_time_s == pytest.approx(p_old.step_time_s)
    assert "overlap_cost given" in mixed.calibration["framework_efficiency"]


def test_a_curve_measured_on_another_network_does_not_calibrate_the_node(cat):
    """The A3 Mega curves (8 x 200 Gb/s TCPXO per node, sources.toml inter_node_Gbps) describe that network, not
    the catalog h100-sxm's 3200 Gb/s: they are named as not used; a node on their network does use them."""
    node = cat.get("h100-sxm")
    inter = calibrate(node).comms["inter"]
    assert "all_gather" not in inter.fits and "A3 Mega" not in inter.label().split("not used")[0]
    assert "not used, measured on another network" in inter.label() and "1600 Gb/s" in inter.label()
    same = replace(node, inter_node_bytes_per_s=1600e9 / 8, inter_node_bytes_per_s_per_accelerator=1600e9 / 64)
    inter2 = calibrate(same).comms["inter"]
    assert "all_gather" in inter2.fits and "not used" not in inter2.label()


def test_attention_default_is_fa2_where_native_else_the_fastest_published_kernel(cat):
    """FlashAttention-2 prices Ampere/Hopper (its own architectures) even where a faster kernel's curve is published,
    so they stay comparable; B200 (FA2 runs its sm80 path there) and MI300X take their fastest published kernel,
    named in the rate's source; a node with no curve at all keeps the labelled assumption."""
    b200, mi300x, h200, gaudi = (calibrate(cat.get(n)) for n in ("b200", "mi300x", "h200-sxm", "gaudi2"))
    assert b200.attention_kernels()[0] == "cudnn" and "flash_attn_2" in b200.attention_kernels()
    assert b200.attention_eff.kind == "published" and "fastest published kernel for b200" in b200.attention_eff.source
    fa2 = b200.with_attention_kernel("flash_attn_2")
    assert fa2.attention_time(1e12, 8192, "bf16") > 2 * b200.attention_time(1e12, 8192, "bf16")
    assert mi300x.attention_eff.kind == "published" and mi300x.attention_kernels()[0].startswith("aiter")
    assert h200.attention_kernels()[0] == "flash_attn_2" and "cudnn" in h200.attention_kernels()
    assert gaudi.attention_eff.kind == "datasheet"


def test_a_search_says_where_its_framework_factor_came_from(tmp_path, cat):
    """The search's predictions name the validation's all-frameworks factor and its per-family spread (not
    "given"), unless the caller gives one."""
    import json

    p = tmp_path / "err.json"
    p.write_text(json.dumps({"framework_efficiency": {"eta": 0.8, "comm_eff": 1.0, "per_family": {
        "a": {"eta": 0.5, "comm_eff": 1.0}, "b": {"eta": 1.0, "comm_eff": 0.7}}}}))
    cal = calibrate(cat.get("h100-sxm"))
    res = search(preset("llama2-7b"), cal, hardware="h100-sxm", accelerators=8, global_batch=64, top=1,
                 error_path=p)
    how = res.best.calibration["framework_efficiency"]
    assert how.startswith("eta = 0.800") and "0.50 (a) to 1.00 (b)" in how
    given = search(preset("llama2-7b"), cal, hardware="h100-sxm", accelerators=8, global_batch=64, top=1,
                   error_path=p, eta=0.7)
    assert given.best.calibration["framework_efficiency"].startswith("eta = 0.700") and "given" in \
        given.best.calibration["framework_efficiency"]


def test_a_stated_cluster_network_replaces_the_catalog_one_across_nodes(cat):
    """A published run on a 1600 Gb/s cluster is priced on that network: the inter-node level drops the catalog
    network's curve for the link model at the stated rate; inside a node nothing changes."""
    from hwmodels.predict.collectives import collective_time

    cal = calibrate(cat.get("a100-80gb-sxm"))  # catalog: p4de, 400 Gb/s per node, with a published EFA curve
    fast = cal.with_network(1600, source="test")
    assert cal.comms["inter"].fits and not fast.comms["inter"].fits
    assert "1600 Gb/s per node" in fast.comms["inter"].source and fast.comms["inter"].kind == "datasheet"
    kw = dict(kind="all_gather", size_bytes=2**30, ranks=64, level="inter", ranks_per_node=8)
    t400, t1600 = collective_time(cal, **kw), collective_time(fast, **kw)
    slow = cal.with_network(400, source="test")
    assert t1600 < collective_time(slow, **kw) and collective_time(slow, **kw) / t1600 == pytest.approx(4, rel=0.25)
    assert t1600 < t400
    intra = dict(kind="all_reduce", size_bytes=2**26, ranks=8, level="intra")
    assert collective_time(fast, **intra) == pytest.approx(collective_time(cal, **intra))
    with pytest.raises(ModelInputError, match="inter_node_Gbps"):
        cal.with_network(0, source="test")


def test_search_honours_a_stated_interleave(cat):
    """A stated pipeline schedule (1F1B: one chunk per rank) is kept; left out, the search picks chunks itself."""
    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama3-70b")
    kw = dict(hardware="h100-sxm", accelerators=64, global_batch=256, tp=8, pp=4, top=3)
    free = search(s, cal, **kw)
    one = search(s, cal, interleave=1, **kw)
    assert {p.layout.interleave for p in (one.best, *one.runners_up)} == {1}
    assert free.best.step_time_s <= one.best.step_time_s * (1 + 1e-9)


def test_validation_prices_torchtitan_op_sac_as_its_recomputed_matmul_share():
    """torchtitan's op-level SAC recomputes every second matmul of wq, wk, wv, wo, w1, w3, w2: wk, wo, w3."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    s = preset("llama3-8b")
    d, kv, f = 4096, 1024, 14336
    want = (d * kv + d * d + d * f) / (2 * d * d + 2 * d * kv + 3 * d * f)
    assert V.torchtitan_op_sac_share(s) == pytest.approx(want)
    assert 0.3 < want < 0.4


def test_calibration_leaves_cache_resident_stream_records_out(cat):
    """A STREAM record that fits in cache is not DRAM bandwidth, whichever path hands it in (report or CLI)."""
    from hwmodels.predict.calibration import CACHE_RESIDENT_BYTES

    node = cat.get("cpu-epyc-zen4-2c")
    small = KernelPoint(kernel="stream_triad", params={"n": 2**16}, metrics={"bytes": 3 * 8 * 2**16,
                                                                           "bytes_per_s": 140e9})
    big = KernelPoint(kernel="stream_triad", params={"n": 2**24}, metrics={"bytes": 3 * 8 * 2**24,
                                                                         "bytes_per_s": 30e9})
    assert small.metrics["bytes"] < CACHE_RESIDENT_BYTES <= big.metrics["bytes"]
    assert calibrate(node, [small, big]).mem_bw.value == pytest.approx(30e9)
    assert calibrate(node, [small]).mem_bw.kind != "measured"  # nothing measured at DRAM: the next source


def test_gpu_step_pays_host_time_only_beyond_the_device_time(cat):
    """A GPU queues kernels while the host runs ahead: with a measured dispatch probe the step lasts the longer of
    the device's work and the host's dispatch (a small model is host-bound); a CPU adds the host time in full."""
    from hwmodels.predict.calibration import Rate
    from hwmodels.predict.predictor import host_bound_overhead, predict_workload

    gpu = calibrate(cat.get("h200-sxm"))
    assert host_bound_overhead(gpu, ((0.004, 0.010),)) == 0.0 and host_bound_overhead(gpu, ((0.014, 0.010),)) == \
        pytest.approx(0.004)
    cpu = calibrate(cat.get("cpu-epyc-zen4-2c"))
    assert cpu.serial_dispatch and host_bound_overhead(cpu, ((0.004, 0.010),)) == 0.004
    cfg = {"width": 256, "layers": 2, "heads": 4, "seq_len": 128, "vocab": 256, "mlp_ratio": 4, "batch_size": 8,
           "precision": "bf16_autocast"}
    base = predict_workload("transformer_lm", cfg, gpu, attention="flash")
    assert gpu.host_op_s is None
    fast = replace(gpu, host_op_s=Rate(value=1e-9, kind="measured", source="test"))
    slow = replace(gpu, host_op_s=Rate(value=1e-3, kind="measured", source="test"))
    assert predict_workload("transformer_lm", cfg, fast, attention="flash")["step_time_s"] == \
        pytest.approx(base["step_time_s"])  # the host hides under the device's work
    s = predict_workload("transformer_lm", cfg, slow, attention="flash")
    device = sum(v for k, v in s["breakdown_s"].items() if k != "overhead")
    assert s["step_time_s"] > base["step_time_s"] and s["breakdown_s"]["overhead"] > gpu.step_overhead_s.value
    assert s["step_time_s"] == pytest.approx(device + s["breakdown_s"]["overhead"])


def _llama8b_notes(cat, hardware: str, seq_len: int, error_path) -> list[str]:
    """The notes of Llama 3 8B at ``seq_len`` on 8 accelerators of ``hardware`` (FSDP, full recomputation, 8
    sequences) read against the validation file ``error_path``."""
    node = cat.get(hardware)
    lay = Layout(dp=8, micro_batch=1, sharding="full_shard", recompute="full")
    return make_prediction(preset("llama3-8b").with_seq_len(seq_len), calibrate(node), lay, hardware=node.id,
                           accelerators=8, global_batch=8, error_path=error_path).notes


def test_a_hardware_whose_published_runs_the_memory_model_rejected_says_so(cat, tmp_path):
    """Where the memory model said a quarter or more of a hardware type's published runs (8 or more, all of which
    ran) would not fit, every prediction on it states that record and the largest ratio: a no-fit there is not
    conclusive. A small record, a low share, or a file without the section adds nothing."""
    import json

    from hwmodels.predict.predictor import memory_record_note

    err = tmp_path / "rec.json"
    err.write_text(json.dumps({"memory_fit": {"by_hardware": {
        "tpu-v6e": {"rows": 13, "predicted_not_to_fit": 11, "max_ratio": 3.28, "median_ratio": 1.43},
        "h100-sxm": {"rows": 228, "predicted_not_to_fit": 15, "max_ratio": 1.05},
        "h200-sxm": {"rows": 8, "predicted_not_to_fit": 2, "max_ratio": 1.03},
        "gb200-nvl72": {"rows": 2, "predicted_not_to_fit": 2, "max_ratio": 1.5},
        "b200": {"rows": 27, "predicted_not_to_fit": 0, "max_ratio": None}}}}))
    note = memory_record_note("tpu-v6e", err)
    assert note and "11 of 13" in note and "3.28x" in note and "not conclusive" in note
    assert memory_record_note("h200-sxm", err) and "2 of 8" in memory_record_note("h200-sxm", err)  # 25%: stated
    for hw in ("h100-sxm", "gb200-nvl72", "b200", "mi300x"):  # 7%; 2 rows only; none rejected; no record
        assert memory_record_note(hw, err) is None
    bare = tmp_path / "bare.json"
    bare.write_text("{}")
    assert memory_record_note("tpu-v6e", bare) is None
    assert any("11 of 13" in n for n in _llama8b_notes(cat, "tpu-v6e", 8192, err))
    assert not any("would not fit although they ran" in n for n in _llama8b_notes(cat, "tpu-v6e", 8192, bare))
    # the committed validation file: the TPU types carry a record, the clean GPU types do not
    assert memory_record_note("tpu-v6e") and memory_record_note("b200") is None


def test_a_prediction_in_a_biased_regime_says_so(cat, tmp_path):
    """A prediction whose sequence length (model size, scale, precision) falls in a bucket where the held-out
    validation was biased by 5% or more over 8+ runs carries that bucket's median signed error; a small or
    unbiased bucket, or a file without the section, adds nothing. Buckets are [lo, hi)."""
    import json

    from hwmodels.predict.predictor import regime_bias_notes, regime_bucket

    assert regime_bucket("seq_len", 2048) == "2048-4096" and regime_bucket("seq_len", 2047) == "1024-2048"
    assert regime_bucket("seq_len", 65536) == ">=32768" and regime_bucket("precision", "fp8") == "fp8"
    assert regime_bucket("accelerators", 8) == "0-9" and regime_bucket("accelerators", 10_000) == ">=4097"
    err = tmp_path / "err.json"
    err.write_text(json.dumps({"bias_by_regime": {
        "seq_len": {">=32768": {"n": 18, "median_signed": -0.164}, "2048-4096": {"n": 155, "median_signed": 0.0}},
        "accelerators": {"0-9": {"n": 3, "median_signed": 0.4}},
        "precision": {"fp16": {"n": 31, "median_signed": 0.06}}}}))
    notes = regime_bias_notes({"seq_len": 65536, "accelerators": 8, "precision": "fp16"}, err)
    assert len(notes) == 2
    assert "bucket >=32768" in notes[0] and "-16.4%" in notes[0] and "18 runs" in notes[0] and "slower" in notes[0]
    assert "precision fp16" in notes[1] and "+6.0%" in notes[1] and "faster" in notes[1]
    assert regime_bias_notes({"seq_len": 4096, "accelerators": 8}, err) == []
    assert any("-16.4%" in n for n in _llama8b_notes(cat, "h100-sxm", 32768, err))
    # the hardware is a regime too: its published runs' held-out median signed error, by catalog id
    by_hw = tmp_path / "by_hw.json"  # another file: the validation file is read once per path
    by_hw.write_text(json.dumps({"bias_by_regime": {"hardware": {"h100-sxm": {"n": 27, "median_signed": 0.064},
                                                                 "b200": {"n": 27, "median_signed": 0.01}}}}))
    hw_notes = _llama8b_notes(cat, "h100-sxm", 32768, by_hw)
    assert any("hardware h100-sxm" in n and "+6.4%" in n and "faster" in n for n in hw_notes)
    assert regime_bias_notes({"hardware": "b200"}, by_hw) == [] and regime_bucket("hardware", "b200") == "b200"
    bare = tmp_path / "bare.json"
    bare.write_text("{}")
    assert not any("bias_by_regime" in n for n in _llama8b_notes(cat, "h100-sxm", 32768, bare))


def test_regime_bias_is_measured_on_rows_priced_as_a_new_prediction_is():
    """The buckets the notes read take only rows priced with their hardware's default attention kernel: a
    llm-foundry row (Triton / FlashAttention v1 curve) and a materialized-attention row (Narayanan et al. 2021) are
    out, a NeMo H100 row is in; the committed file keeps the all-rows buckets apart."""
    import json

    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    from hwmodels.predict.predictor import ERROR_FILE
    want = {"lf-h100-7b-s65536-g8-mb1": False, "lf-a100-40-7b-s2048-g8-mb12": False, "narayanan21-t1-1.7b": False,
            "nemo2407-h100-llama2-7b-g8": True}
    rows = [r for r in csv.DictReader(open(V.RUNS, newline="")) if r["run_id"] in want]
    preds, _ = V.prepare(rows, V.default_catalog())
    assert {p["id"]: p["new_pricing"] for p in preds} == want
    err = json.loads(ERROR_FILE.read_text())
    assert 0 < err["bias_by_regime"]["rows"] < err["rows_used"]
    n_sub = sum(v["n"] for v in err["bias_by_regime"]["hardware"].values())
    n_all = sum(v["n"] for v in err["bias_by_regime_all_rows"]["hardware"].values())
    assert n_sub == err["bias_by_regime"]["rows"] and n_all == err["rows_used"]


def test_regime_bias_within_hardware_does_not_repeat_a_hardwares_bias(tmp_path):
    """within_hardware: a bucket filled with one hardware's rows states what is left after that hardware's own
    median signed error; the hardware bucket keeps its raw median. A note read from such a file says so."""
    import json
    from types import SimpleNamespace as NS

    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    from hwmodels.predict.predictor import regime_bias_notes

    def row(hw, n):
        return {"hw": hw, "n": n, "spec": NS(seq_len=4096, n_params=lambda: 8e9), "layout": NS(precision="bf16"),
                "row": {"year": "2025"}}
    # hardware a: +20% on every run, one node or many; hardware b: exact, all multi-node
    preds = [row("a", 8)] * 3 + [row("a", 64)] * 3 + [row("b", 64)] * 4
    errs = np.array([0.2] * 6 + [0.0] * 4)
    raw, within = V.bias_by_regime(preds, errs), V.bias_by_regime(preds, errs, within_hardware=True)
    assert raw["accelerators"]["0-9"]["median_signed"] == pytest.approx(0.2)
    assert within["accelerators"]["0-9"]["median_signed"] == pytest.approx(0.0)
    assert within["hardware"]["a"]["median_signed"] == pytest.approx(0.2)  # the hardware's own, as raw
    assert within["accelerators"]["9-65"]["median_signed"] == pytest.approx(0.0)
    # the year a run was published: buckets in year order, within hardware like the other regimes
    dated = [{**p, "row": {"year": y}} for p, y in zip(preds, ["2025"] * 3 + ["2023"] * 3 + ["2024", "", "", ""])]
    by_year = V.bias_by_regime(dated, errs, within_hardware=True)["year"]
    assert list(by_year) == ["2023", "2024", "2025", "unstated"]
    assert by_year["2023"] == {"n": 3, "median_signed": pytest.approx(0.0), "median_abs": pytest.approx(0.0)}
    f = tmp_path / "err.json"
    f.write_text(json.dumps({"bias_by_regime": {"within_hardware": True,
                                                "accelerators": {"0-9": {"n": 10, "median_signed": 0.08}},
                                                "hardware": {"b200": {"n": 27, "median_signed": 0.064}}}}))
    notes = regime_bias_notes({"accelerators": 8, "hardware": "b200"}, path=f)
    assert len(notes) == 2 and "+8.0% from the published throughput beyond each run's hardware's own bias" in notes[0]
    assert "beyond" not in notes[1] and "+6.4%" in notes[1]


def test_the_validation_files_regime_buckets_are_the_predictors():
    """Every bucket the committed validation file reports is one the predictor's notes can look up."""
    import json

    from hwmodels.predict.predictor import BIAS_EDGES, ERROR_FILE, regime_bucket

    bias = json.loads(ERROR_FILE.read_text())["bias_by_regime"]
    assert set(BIAS_EDGES) <= set(bias)
    for name, edges in BIAS_EDGES.items():
        if edges is None:
            continue
        names = [regime_bucket(name, lo) for lo in edges[:-1]]
        assert list(bias[name]) == [k for k in names if k in bias[name]], name  # known buckets, in edge order


# -------------------------------------------------------------------------------- context parallelism
def test_context_parallel_ops_split_the_sequence_and_ring_the_keys_and_values():
    """A CP rank runs s/cp tokens through the GEMMs, 1/cp of the sequence's attention FLOPs (load-balanced causal
    chunks), and sends its keys and values round the ring: cp - 1 steps forward, twice that backward."""
    s = preset("llama3-8b")
    T, cp = 8192, 2
    one = O.layer_ops(s, micro_batch=1, seq_len=T, recompute="none")
    two = O.layer_ops(s, micro_batch=1, seq_len=T, recompute="none", cp=cp)
    for kind in ("gemm", "attention"):
        assert sum(o.flops for o in two if o.kind == kind) * cp == pytest.approx(
            sum(o.flops for o in one if o.kind == kind), rel=1e-12)
    assert {o.m for o in two if o.kind == "gemm" and o.phase == "fwd"} == {T // cp}
    ring = [o for o in two if o.group == "cp"]
    kv = (T // cp) * 2 * s.d_kv * 2  # keys and values of the rank's tokens, bf16
    assert [(o.phase, o.count, o.collective, o.nbytes) for o in ring] == [("fwd", 1, "send_recv", kv),
                                                                          ("bwd", 2, "send_recv", kv)]
    full = [o for o in O.layer_ops(s, micro_batch=1, seq_len=T, recompute="full", cp=4) if o.group == "cp"]
    assert [(o.phase, o.count) for o in full] == [("fwd", 3), ("bwd", 6), ("recompute", 3)]
    assert not [o for o in one if o.group == "cp"]
    with pytest.raises(ModelInputError, match="context parallelism"):
        O.layer_ops(s, micro_batch=1, seq_len=T, cp=2, attention="materialized")


def test_context_parallel_layout_groups_and_step(cat):
    """CP ranks sit next to the TP ranks (rank order tp-cp-dp-pp); gradients are reduced over DP x CP. The same
    16 sequences on 16 H100s with cp=2 (dp 8, two micro-batches of half sequences per rank) do the same compute
    per rank as cp=1, hold half the activations, reduce gradients over the same 16 ranks, and add the ring."""
    from hwmodels.predict.layout import placement

    cal = calibrate(cat.get("h100-sxm"))
    lay = Layout(dp=8, tp=1, cp=2, micro_batch=1, sharding="zero1")
    assert lay.world == 16 and lay.shard_degree(cal.scale_up_size) == 16
    assert placement(Layout(dp=2, tp=4, cp=2), scale_up=8, accelerators_per_node=8)["cp"] == ("intra", 2)
    assert placement(Layout(dp=2, tp=8, cp=2), scale_up=8, accelerators_per_node=8)["cp"] == ("inter", 1)
    assert placement(Layout(dp=2, tp=4, cp=2), scale_up=8, accelerators_per_node=8)["dp"] == ("inter", 2)
    s = preset("llama3-8b")
    base = Layout(dp=16, tp=1, micro_batch=1, sharding="zero1")
    a = step_times(s, cal, base, global_batch=16)
    b = step_times(s, cal, lay, global_batch=16)
    assert b.microbatches == 2 and a.microbatches == 1
    assert b.model_flops == a.model_flops and b.hardware_flops == a.hardware_flops
    assert b.compute == pytest.approx(a.compute, rel=0.1)
    assert b.memory.activations == pytest.approx(a.memory.activations / 2, rel=0.05)
    assert b.comm_total > a.comm_total  # the ring on top of the same gradient collectives
    p = make_prediction(s, cal, lay, hardware="h100-sxm", accelerators=16, global_batch=16)
    assert p.tokens_per_s == pytest.approx(16 * 8192 / p.step_time_s) and p.layout.cp == 2
    with pytest.raises(ModelInputError, match="dp\\*tp\\*pp\\*cp"):
        make_prediction(s, cal, lay, hardware="h100-sxm", accelerators=8, global_batch=16)


def test_the_search_keeps_a_stated_context_parallel_degree(cat):
    from hwmodels.predict.search import search

    cal = calibrate(cat.get("h100-sxm"))
    res = search(preset("llama3-8b"), cal, hardware="h100-sxm", accelerators=16, global_batch=16, cp=2, top=3)
    assert res.best is not None
    assert all(p.layout.cp == 2 and p.layout.world == 16 for p in (res.best, *res.runners_up))
    assert search(preset("llama3-8b"), cal, hardware="h100-sxm", accelerators=16, global_batch=16, cp=1,
                  top=1).best.layout.cp == 1


def test_the_search_tries_context_parallelism_for_long_sequences_only(cat):
    """From CP_MIN_SEQ tokens the search tries CP_SEARCH: for Llama 3 8B at 8k on 8 H100 with FSDP and micro-batch
    2, CP 2 holds half the activations and needs no recomputation, faster than the best CP 1 layout (which
    recomputes); at 4k every layout it returns has CP 1."""
    from hwmodels.predict.search import CP_MIN_SEQ, search

    cal = calibrate(cat.get("h100-sxm"))
    s = preset("llama3-8b").with_seq_len(CP_MIN_SEQ)
    kw = dict(hardware="h100-sxm", accelerators=8, global_batch=16, micro_batch=2, sharding="full_shard", tp=1,
              pp=1, top=3)
    auto, one = search(s, cal, **kw), search(s, cal, cp=1, **kw)
    assert auto.best.layout.cp == 2 and auto.best.layout.recompute == "none"
    assert one.best.layout.recompute != "none" and auto.best.step_time_s < one.best.step_time_s
    short = search(preset("llama3-8b").with_seq_len(4096), cal, **kw)
    assert all(p.layout.cp == 1 for p in (short.best, *short.runners_up))


def test_every_prospective_row_is_in_the_validation_set_and_scored():
    """The prospective set names rows of training_runs.csv (a typo would drop a row silently), and the committed
    validation file scores each of them."""
    import csv
    import json

    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    from hwmodels.predict.predictor import ERROR_FILE

    with open(V.RUNS, newline="") as f:
        ids = {r["run_id"] for r in csv.DictReader(f)}
    scored = json.loads(ERROR_FILE.read_text())["prospective"]
    for since, rows in V.PROSPECTIVE.items():
        assert len(set(rows)) == len(rows) and set(rows) <= ids, set(rows) - ids
        assert set(scored[since]["rows"]) == set(rows) and scored[since]["per_family"]["n"] == len(rows)


def test_layout_label_is_one_line_for_tables():
    """The compact layout form the CLI table and the validation print share: CP only when > 1, the hybrid mark,
    and the recomputed share of the layers only when it is partial."""
    from hwmodels.predict.layout import Layout, layout_label

    lay = Layout(dp=4, tp=8, pp=8, cp=2, interleave=8, micro_batch=1, sharding="zero1", recompute="full",
                 recompute_layers=0.25, hybrid_shard=True)
    assert lay.label() == "dp4 tp8 pp8 cp2 v8 mb1 zero1(hybrid) full@25%"
    assert layout_label(Layout(dp=8, tp=1, pp=1, micro_batch=2, sharding="ddp").to_dict()) == \
        "dp8 tp1 pp1 v1 mb2 ddp none"


def test_published_spread_pairs_only_runs_the_inputs_cannot_tell_apart():
    """Two runs equal on every input column (an empty layout cell matches a stated one) form a pair whose floor is
    (r - 1) / (r + 1); a stated layout difference (recompute), another TP or an unstated interleave count do not."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V

    base = {c: "" for c in V.SPREAD_KEY + V.SPREAD_OPEN}
    base.update(hardware="h100-sxm", model="llama3-8b", seq_len="8192", precision="fp8", accelerators="8",
                global_batch="128", micro_batch="1", tp="1", pp="1", interleave="1")

    def run(rid, tps, **cells):
        return {"id": rid, "target": tps, "row": {**base, **cells}}

    preds = [run("a", 150.0, sharding="zero1", activation_checkpointing="none"),
             run("b", 100.0),  # layout cells empty: the same input as a (and as c)
             run("c", 120.0, activation_checkpointing="full"),  # differs from a in a stated cell
             run("d", 50.0, tp="2"),  # another TP: another input
             run("e", 10.0, interleave="")]  # interleave count not stated: not the same as 1
    sp = V.published_spread(preds)
    got = {tuple(p["rows"]): p for p in sp["pairs"]}
    assert set(got) == {("a", "b"), ("c", "b")}
    assert got[("a", "b")]["ratio"] == pytest.approx(1.5) and sp["floor"] == pytest.approx(0.5 / 2.5)
    # the floor is the best one prediction can do on the pair: the harmonic mean misses both by exactly it
    hm = 2 * 150.0 * 100.0 / 250.0
    assert abs(hm / 150.0 - 1) == pytest.approx(sp["floor"]) and abs(hm / 100.0 - 1) == pytest.approx(sp["floor"])
    assert [p["rows"] for p in sp["pairs"]][0] == ["a", "b"]  # largest ratio first
    assert run("x", 1.0, cp="")["row"]["cp"] == "" and V.published_spread(
        [run("x", 2.0, cp=""), run("y", 1.0, cp="1")])["pairs"][0]["ratio"] == 2.0  # cp empty = 1


def test_placement_counts_ranks_per_nvlink_domain_not_per_tray():
    """GB200 NVL72: the NVLink domain (72) spans 18 four-GPU trays; a DP group's ranks in one domain reduce over
    NVLink, so the group is placed by the domain (9 of a 64-rank group under TP 2 x CP 4), not by the tray; an HGX
    board (domain = node = 8) is unchanged."""
    from hwmodels.predict.layout import Layout, placement

    gb = placement(Layout(dp=64, tp=2, cp=4), scale_up=72, accelerators_per_node=4)
    assert gb["dp"] == ("inter", 36)  # the DP x CP gradient group: 256 ranks, 72 // 2 = 36 of them per domain
    assert placement(Layout(dp=64, tp=2, cp=4), scale_up=8, accelerators_per_node=8)["dp"] == ("inter", 4)
    cal = calibrate(default_catalog().get("gb200-nvl72"))
    spec = parse_spec("llama3-8b")
    lay = Layout(dp=64, tp=2, cp=4, micro_batch=1, sharding="zero1", recompute="none", sequence_parallel=True,
                 precision="fp8")
    st = step_times(spec, cal, lay, global_batch=64)
    tray = step_times(spec, replace(cal, scale_up_size=4), lay, global_batch=64)  # a domain of one tray
    # placed by the domain, 36 ranks share NVLink and one NIC stage carries 1/36 of the bytes across domains
    assert st.exposed_comm < 0.5 * tray.exposed_comm and st.compute == pytest.approx(tray.compute)


def test_memory_interval_reads_the_memory_validation(tmp_path, a100):
    """The memory figure carries the memory model's held-out error on published peak memory
    (benchmarks/memory_validation.py); without that file it carries none, and says so nowhere silently."""
    import json

    from hwmodels.predict.predictor import memory_fit_note, memory_held_out_error

    p = tmp_path / "mem.json"
    p.write_text(json.dumps({"level": 0.9, "band_rel": 0.2, "overall": {"n": 12, "median": 0.08, "max": 0.3}}))
    s = preset("llama2-7b")
    lay = Layout(dp=8, micro_batch=1, sharding="zero1", recompute="none")
    pr = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=8, global_batch=64,
                         memory_error_path=p)
    lo, hi = pr.interval["memory_per_accelerator_GiB"]
    tot = pr.memory.total / 2**30
    assert lo == pytest.approx(tot / 1.2) and hi == pytest.approx(tot * 1.2)
    assert "12 published peak-memory runs" in pr.interval["memory_method"]
    none = make_prediction(s, a100, lay, hardware="a100-80gb-sxm", accelerators=8, global_batch=64,
                           memory_error_path=tmp_path / "absent.json")
    assert "memory_per_accelerator_GiB" not in none.interval
    assert memory_held_out_error(tmp_path / "absent.json")[0] is None
    # a file at another level is not read as the 90% band
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"level": 0.5, "band_rel": 0.05}))
    assert memory_held_out_error(other)[0] is None
    # the fit verdict is flagged only when the capacity lies inside the interval, on either side of the estimate
    g = 2.0**30
    assert "the layout fits by the point estimate" in memory_fit_note(70 * g, 80 * g, 0.2)
    assert "does not fit" in memory_fit_note(90 * g, 80 * g, 0.2)
    assert memory_fit_note(50 * g, 80 * g, 0.2) is None and memory_fit_note(120 * g, 80 * g, 0.2) is None
    assert memory_fit_note(70 * g, 80 * g, None) is None


def test_the_search_returns_a_memory_safe_pick_with_the_memory_models_headroom(tmp_path, cat):
    """Beside the fastest layout (which may fit by a few GiB of a point estimate), the search returns the fastest
    layout that still fits when memory is the memory model's held-out q90 error above the estimate."""
    import json

    node = cat.get("h100-sxm")
    cal = calibrate(node)
    cap = node.memory_capacity_bytes
    wide = tmp_path / "wide.json"
    wide.write_text(json.dumps({"level": 0.9, "band_rel": 0.5, "overall": {"n": 9, "median": 0.2, "max": 0.6}}))
    res = search(preset("llama3-8b"), cal, hardware=node.id, accelerators=64, global_batch=512, top=3,
                 memory_error_path=wide)
    assert res.memory_margin == pytest.approx(0.5)
    best, safe = res.best, res.memory_safe
    # the fastest layout of this job uses most of the capacity: not safe with 50% headroom
    assert best.memory.total * 1.5 > cap and safe is not None and safe is not best
    assert safe.memory.total * 1.5 <= cap and safe.fits
    assert safe.tokens_per_s <= best.tokens_per_s and safe.layout.world == 64
    assert any("memory-safe alternative" in n and safe.layout.label() in n for n in best.notes)
    assert any(n.startswith("memory-safe pick") for n in safe.notes)
    d = res.to_dict()
    assert d["memory_margin"] == pytest.approx(0.5) and d["memory_safe"]["layout"] == safe.layout.to_dict()
    # no headroom: the fastest layout is its own memory-safe pick
    none = tmp_path / "none.json"
    none.write_text(json.dumps({"level": 0.9, "band_rel": 0.0, "overall": {"n": 9}}))
    res0 = search(preset("llama3-8b"), cal, hardware=node.id, accelerators=64, global_batch=512, top=3,
                  memory_error_path=none)
    assert res0.memory_safe is res0.best and not any("memory-safe" in n for n in res0.best.notes)
    # a headroom nothing can keep: no memory-safe layout, and the best says so
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"level": 0.9, "band_rel": 100.0, "overall": {"n": 9}}))
    resh = search(preset("llama3-8b"), cal, hardware=node.id, accelerators=64, global_batch=512, top=3,
                  memory_error_path=huge)
    assert resh.memory_safe is None and resh.best is not None
    assert any("no layout of this job fits with that headroom" in n for n in resh.best.notes)
    # without a memory validation: no pick, no margin; the fastest layout is unchanged throughout
    absent = search(preset("llama3-8b"), cal, hardware=node.id, accelerators=64, global_batch=512, top=3,
                    memory_error_path=tmp_path / "absent.json")
    assert absent.memory_margin is None and absent.memory_safe is None and "memory_safe" not in absent.to_dict()
    assert {r.best.layout for r in (res, res0, resh, absent)} == {best.layout}


def test_the_memory_safe_walk_finds_what_a_scan_at_the_smaller_capacity_finds(cat):
    """The search walks the capacity and the memory-safe capacity side by side (one memory estimate and one step
    time per layout for both); its pick must be the layout, time and memory a scan at the safe capacity alone
    finds (the same layout, so the same prediction), on jobs where the fastest layout does not keep the headroom,
    and on offload-capable nodes."""
    from hwmodels.predict.predictor import framework_factors
    from hwmodels.predict.search import _scan, default_global_batch, memory_safe_capacity

    checked = 0
    for model, n, hw in (("llama2-7b", 64, "h100-sxm"), ("llama3-70b", 512, "mi300x"), ("llama2-13b", 8, "b200"),
                         ("llama3-70b", 512, "gb200-nvl72"), ("llama2-7b", 64, "tpu-v5p")):
        spec, node = preset(model), cat.get(hw)
        cal = calibrate(node)
        res = search(spec, cal, hardware=hw, accelerators=n)
        safe_cap, margin = memory_safe_capacity(node.memory_capacity_bytes)
        assert margin is not None and res.memory_safe is not None
        if res.memory_safe is res.best:
            continue
        job = dict(spec=spec, cal=cal, accelerators=n, gb=default_global_batch(spec.seq_len), seq=spec.seq_len,
                   precision="bf16", tp=None, pp=None, sharding=None, micro_batch=None, recompute=None,
                   factors=framework_factors(), attention="flash", interleave=None, tp_comm_overlap=False,
                   dp_comm_overlap=True, cp=None, quantized_saves=True)
        alone, *_ = _scan(**job, capacity=safe_cap, top=1)
        _, lay, st = alone[0]
        assert res.memory_safe.layout == lay, (model, hw)
        assert res.memory_safe.memory.total == pytest.approx(st.memory.total, rel=1e-12)
        assert st.memory.total <= safe_cap
        checked += 1
    assert checked >= 3


def test_layout_evolve_is_replace_without_the_checks():
    lay = Layout(dp=4, tp=2, pp=2, interleave=2, micro_batch=2, sharding="zero1", sequence_parallel=True)
    for changes in ({"recompute": "full", "recompute_layers": 0.5}, {"micro_batch": 8}, {"offload_layers": 3}):
        ev, rep = lay.evolve(**changes), replace(lay, **changes)
        assert ev == rep and hash(ev) == hash(rep) and ev.to_dict() == rep.to_dict() and ev is not lay
    assert lay.micro_batch == 2 and lay.recompute == "none"  # the original is untouched
    with pytest.raises(ModelInputError, match="layout.micro_batch"):
        replace(lay, micro_batch=0)  # replace checks; evolve is for values taken from the valid choices


def test_memory_safe_capacity_divides_by_the_headroom(tmp_path):
    import json

    from hwmodels.predict.search import memory_safe_capacity

    p = tmp_path / "m.json"
    p.write_text(json.dumps({"level": 0.9, "band_rel": 0.25}))
    assert memory_safe_capacity(100.0, p) == (pytest.approx(80.0), pytest.approx(0.25))
    assert memory_safe_capacity(100.0, tmp_path / "absent.json") == (100.0, None)


def test_validation_scores_the_memory_safe_pick_against_the_published_runs(cat):
    """predictor_validation.memory_safe_report: which published layouts keep the headroom, and the memory-safe
    pick's held-out error = the row's LOO error x the pick's throughput over the fastest layout's."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V

    from hwmodels.predict.predictor import memory_held_out_error

    margin, _ = memory_held_out_error()
    cal = calibrate(cat.get("a100-80gb-sxm"))
    spec = preset("llama2-7b")
    fast = Layout(dp=8, micro_batch=2, sharding="zero1", recompute="none")
    slow = Layout(dp=8, micro_batch=1, sharding="full_shard", recompute="full")
    base = dict(spec=spec, cal=cal, gb=64, n=8, core="flash", layout=fast, searched=True, fits=True, cap_GiB=80.0)
    preds = [dict(base, mem_GiB=79.0, safe_kind="other", safe_layout=slow),
             dict(base, mem_GiB=10.0, safe_kind="same", safe_layout=None),
             dict(base, mem_GiB=79.0, safe_kind="none", safe_layout=None),
             dict(base, mem_GiB=10.0, searched=False, safe_kind="stated", safe_layout=None),
             dict(base, mem_GiB=90.0, fits=False, searched=False, safe_kind="stated", safe_layout=None)]
    loo = np.array([0.10, -0.05, 0.0, 0.0, 0.0])
    g = V.GRID.index((1.0, 1.0, 0.0))
    r = V.memory_safe_report(preds, loo, g)
    assert r["margin"] == pytest.approx(margin)
    # 10 GiB of 80 keeps a 74% headroom, 79 does not; a layout that does not fit is not counted
    assert r["published_layouts_fitting"] == 4 and r["published_layouts_within_margin"] == 2
    assert r["published_within_headroom"]["0.05"] == 2 and r["searched_rows"] == 3
    assert r["searched_by_kind"] == {"none": 1, "other": 1, "same": 1}
    ratio = V.tps_at(preds[0], slow, g) / V.tps_at(preds[0], fast, g)
    assert ratio < 1  # full recomputation on half the micro-batch is slower
    assert V.tps_at(preds[0], fast, g) == pytest.approx(V.tps_grid(preds[0])[g])  # the grid's own figure
    assert r["searched_safe_median_signed"] == pytest.approx(np.median([1.10 * ratio - 1, -0.05]))
    assert r["searched_best_median_signed"] == pytest.approx(np.median([0.10, -0.05]))
    assert r["safe_slower_median"] == pytest.approx(1 / ratio - 1)


def test_same_die_nodes_share_kernel_figures_at_the_same_fraction_of_peak(cat, tmp_path):
    """A node with a [die] same_as sibling takes the sibling's published matmul (per dtype) and attention (per
    kernel) rows it has none of its own for, at the same fraction of datasheet peak; its own rows win; bandwidth
    is not carried; only the sibling's own rows carry (no chains); an unknown sibling names the field."""
    b300, gb300 = calibrate(cat.get("b300")), calibrate(cat.get("gb300-nvl72"))
    h100, h200 = calibrate(cat.get("h100-sxm")), calibrate(cat.get("h200-sxm"))
    # GB300 has no matmul row: B300's fractions (its peaks are 1.111 x B300's, the fraction is the same)
    for dt in ("bf16", "fp8"):
        assert gb300.matmul_eff_max[dt].value == pytest.approx(b300.matmul_eff_max[dt].value, rel=1e-9)
        assert "measured on b300" in gb300.matmul_eff_max[dt].source and "x 1.111" in gb300.matmul_eff_max[dt].source
        assert "measured on" not in b300.matmul_eff_max[dt].source
    # B300 has no attention row: GB300's cuDNN curve at the same fraction (same eff_max and s_half)
    assert b300.attention_eff.value == pytest.approx(gb300.attention_eff.value, rel=1e-9)
    assert b300.extra["attention_s_half"] == gb300.extra["attention_s_half"]
    assert "measured on gb300-nvl72" in b300.attention_eff.source
    assert "measured on" not in gb300.attention_eff.source
    # H200: its own fp8 row (73.4% of peak) wins over H100's (70.9%); bf16 and FlashAttention-2 are H100's
    assert h200.matmul_eff_max["fp8"].value != pytest.approx(h100.matmul_eff_max["fp8"].value, rel=1e-3)
    assert "measured on" not in h200.matmul_eff_max["fp8"].source
    assert h200.matmul_eff_max["bf16"].value == pytest.approx(h100.matmul_eff_max["bf16"].value, rel=1e-9)
    assert h200.attention_eff.value == pytest.approx(h100.attention_eff.value, rel=1e-9)
    assert "cudnn" in h200.extra["attention_curves"]  # its own cuDNN curve stays its own
    assert h200.mem_bw.value != pytest.approx(h100.mem_bw.value, rel=0.05)  # 4.8 vs 3.35 TB/s: not carried
    # no chains: a node on B300's die takes B300's own rows (matmul), not what B300 took from GB300 (attention)
    x = replace(cat.get("b300"), id="b300-x", same_die_as="b300")
    cx = calibrate(x, catalog=cat.with_node(x))
    assert cx.matmul_eff_max["bf16"].value == pytest.approx(b300.matmul_eff_max["bf16"].value, rel=1e-9)
    assert "no attention measurement" in cx.attention_eff.source
    # without published data nothing is carried either
    assert "measured on" not in calibrate(cat.get("gb300-nvl72"), use_published=False).matmul_eff_max["bf16"].source
    # without published.csv rows, the fallback tables carry the same way (H200: H100's table figures)
    empty = tmp_path / "published.csv"
    empty.write_text((REPO / "data" / "calibration" / "published.csv").read_text().splitlines()[0] + "\n")
    bare = calibrate(cat.get("h200-sxm"), published_csv=empty)
    assert "measured on h100-sxm" in bare.matmul_eff_max["bf16"].source
    assert "measured on h100-sxm" in bare.attention_eff.source and bare.attention_eff.value == pytest.approx(0.34)
    y = replace(cat.get("b300"), id="b300-y", same_die_as="b400")
    with pytest.raises(ModelInputError, match=r"b300-y: die\.same_as: unknown node 'b400'; valid choices: .*b300"):
        calibrate(y, catalog=cat.with_node(y))


def test_a_pipeline_that_needs_the_embedding_and_loss_slots_balances_the_head(cat):
    """Megatron needs the layers to divide over the pipeline chunks; where they do not and two more would (Llama 3.1
    405B: 126 layers on PP 16 x VP 8), the embedding and the loss take a layer's slot each, so the last stage runs
    one layer fewer beside the LM head and the slowest stage is a full one, not a full one plus the head."""
    from hwmodels.predict.predictor import asymmetric_split

    assert asymmetric_split(126, 16, 8) and asymmetric_split(126, 8, 4) and asymmetric_split(30, 4, 1)
    assert not asymmetric_split(80, 4, 5) and not asymmetric_split(126, 18, 7) and not asymmetric_split(30, 1, 1)
    assert not asymmetric_split(29, 4, 1)  # neither divides: uneven stages, the slowest with ceil(L/pp) + head
    cal = calibrate(cat.get("h100-sxm"))
    base = "d_model=4096,n_heads=32,n_kv_heads=8,ffn_dim=14336,glu=true,vocab=128256,n_layers="
    lay = Layout(dp=2, tp=1, pp=4, micro_batch=1, sharding="zero1", recompute="none")

    def compute(n_layers):
        st = step_times(parse_spec(base + str(n_layers)).with_seq_len(4096), cal, lay, global_batch=16)
        return st.compute / st.microbatches

    layer = compute(32) - compute(28)  # both divide by 4: 8 vs 7 layers a stage, each with the head
    head = compute(32) - 8 * layer
    assert head > 0
    assert compute(30) == pytest.approx(max(8 * layer, 7 * layer + head))  # 30 + 2 slots = 8 a stage
    assert compute(30) < compute(32)


def test_the_search_lower_bound_never_exceeds_the_step_it_bounds(cat):
    """The search prunes a layout whose lower bound per sequence cannot beat its current top; the bound (compute,
    memory-bound time, the layers' exposed TP time and the bubble) must stay below the priced step time, with the
    asymmetric pipeline split too (126 layers on PP 8/16 x VP 1-8) and with TP collectives pipelined or not."""
    from types import SimpleNamespace

    from hwmodels.predict.predictor import asymmetric_split
    from hwmodels.predict.search import _lower_bound

    cal = calibrate(cat.get("gb200-nvl72"))
    s = preset("llama3-405b")
    factors = SimpleNamespace(eta=0.9, comm_eff=0.8)
    seen_asym = 0
    for pp, v in ((8, 1), (8, 2), (8, 4), (8, 8), (16, 8), (18, 7), (7, 2)):
        for overlap in (False, True):
            lay = Layout(dp=2, tp=4, pp=pp, interleave=v, micro_batch=1, sharding="zero1", recompute="none",
                         sequence_parallel=True, precision="fp8", tp_comm_overlap=overlap)
            st = step_times(s, cal, lay, global_batch=64, eta=0.9, comm_eff=0.8)
            per_seq = st.microbatches * lay.dp * lay.micro_batch
            bound = _lower_bound(s, cal, lay, 64, s.seq_len, factors, {})
            assert bound <= st.total / per_seq * (1 + 1e-9), (pp, v, overlap)
            # the TP collectives tighten it: fully when they sit on the critical path, by their 5% floor when not
            free = _lower_bound(s, cal, lay, 64, s.seq_len, SimpleNamespace(eta=0.9, comm_eff=float("inf")), {})
            assert free <= (st.compute + st.memory_bound + st.bubble) / per_seq * (1 + 1e-9)
            assert bound > free * (1.01 if not overlap else 1.0), (pp, v, overlap)
        seen_asym += asymmetric_split(s.n_layers, pp, v)
    assert seen_asym >= 4


def test_a_searched_best_matmul_shape_keeps_its_k_falloff(cat, tmp_path):
    """A published matmul figure is divided by the tile model's shape factor to give the ceiling. For a brute-force
    search's best shape (statistic=best_shape_mean) only the tile/wave terms are undone: the search tried larger K
    and found this K fastest, so the K falloff cost it nothing there. A figure at a given shape (timeit_mean) has
    its K term undone too. A vendor's Max-Achievable FLOPs figure (AMD's MAF) is taken as it stands."""
    from hwmodels.predict.calibration import _gemm_eff, _units, k_half

    node = cat.get("gb200-nvl72")
    peak = {d: p.dense_flops_per_s for d, p in node.peaks.items()}
    head = "node_id,quantity,value,unit,condition,framework,source,source_detail,as_of\n"
    row = "gb200-nvl72,matmul_tflops,3000,TFLOP/s,dtype=fp8;m=19456;n=5120;k=1536;statistic={st},f,s,d,2026-01-01\n"
    got = {}
    for st in ("best_shape_mean", "timeit_mean"):
        path = tmp_path / f"{st}.csv"
        path.write_text(head + row.format(st=st))
        got[st] = calibrate(node, published_csv=path).matmul_eff_max["fp8"].value
    raw = 3000e12 / peak["fp8"]
    tiles = _gemm_eff(_units(node), 1.0, 19456, 5120, 1536, 0.0)
    full = _gemm_eff(_units(node), 1.0, 19456, 5120, 1536, k_half(peak, "fp8"))
    assert got["best_shape_mean"] == pytest.approx(raw / tiles)
    assert got["timeit_mean"] == pytest.approx(raw / full)
    assert got["timeit_mean"] > got["best_shape_mean"]
    # a vendor's Max-Achievable FLOPs figure (statistic maf_*) is the ceiling as it stands, no shape term undone
    path = tmp_path / "maf.csv"
    path.write_text(head + row.format(st="maf_shape_median"))
    assert calibrate(node, published_csv=path).matmul_eff_max["fp8"].value == pytest.approx(raw)
    assert full < 1.0  # (so the maf figure and the timed one differ)


def test_fp8_without_its_own_figure_takes_the_published_fp8_over_bf16_median(cat, tmp_path):
    """A node with a bf16 matmul ceiling but no fp8 one gets fp8 = (median over the catalog nodes whose own published
    rows give both ceilings of fp8 fraction / bf16 fraction) x its bf16 fraction, with half the ratios' range added
    to its sigma and the nodes named in its source; with fewer than MIN_RATIO_NODES such nodes, the labelled
    assumption of FROM_BF16_CEILING."""
    from hwmodels.predict.calibration import FROM_BF16_CEILING, MIN_RATIO_NODES, narrow_over_bf16

    head = "node_id,quantity,value,unit,condition,framework,source,source_detail,as_of\n"
    row = "{n},matmul_tflops,{v},TFLOP/s,dtype={dt};statistic=peak_mean,f,s,d,2026-01-01\n"
    fracs = {"h100-sxm": (0.80, 0.72), "b200": (0.70, 0.70), "gb200-nvl72": (0.75, 0.60)}  # ratios 0.9, 1.0, 0.8
    body = "".join(row.format(n=n, v=f * cat.get(n).peaks[dt].dense_flops_per_s / 1e12, dt=dt)
                   for n, fs in fracs.items() for dt, f in zip(("bf16", "fp8"), fs))
    body += row.format(n="mi300x", v=0.5 * cat.get("mi300x").peaks["bf16"].dense_flops_per_s / 1e12, dt="bf16")
    path = tmp_path / "pub.csv"
    path.write_text(head + body)
    f, extra, how = narrow_over_bf16("fp8", path, cat)
    assert len(fracs) >= MIN_RATIO_NODES
    assert f == pytest.approx(0.9) and extra == pytest.approx((1.0 - 0.8) / 2 / 0.9)
    assert "3 nodes" in how and "b200 1.00" in how and "mi300x" not in how
    mi = calibrate(cat.get("mi300x"), published_csv=path)
    assert mi.matmul_eff_max["bf16"].value == pytest.approx(0.5)
    assert mi.matmul_eff_max["fp8"].value == pytest.approx(0.45)
    assert "fp8 = 0.90 x the bf16 fraction" in mi.matmul_eff_max["fp8"].source
    assert mi.matmul_eff_max["fp8"].rel_sigma == pytest.approx(mi.matmul_eff_max["bf16"].rel_sigma + extra)
    # a node's own fp8 figure is kept as it is
    assert calibrate(cat.get("b200"), published_csv=path).matmul_eff_max["fp8"].value == pytest.approx(0.70)
    # two nodes with both: the assumption stands, said so
    two = tmp_path / "two.csv"
    two.write_text(head + "".join(line for line in body.splitlines(keepends=True) if not line.startswith("gb200")))
    f2, extra2, how2 = narrow_over_bf16("fp8", two, cat)
    assert (f2, extra2) == FROM_BF16_CEILING["fp8"] and how2.startswith("assumption")


def test_power_limit_factor_interpolates_the_published_clock_curve(cat, tmp_path):
    """compute_factor: 1 at or above TDP; the clock rows' ratio at the limit's fraction of TDP, linear between
    published points (with (1, 1) at TDP); the node's own curve (tighter sigma) or another node's at the same
    fraction (wider, said so); below the lowest point, or not a positive number, an error naming the range. The
    training-throughput rows are cross-checks, never the curve."""
    from hwmodels.errors import ModelInputError
    from hwmodels.predict.power import CARRIED_SIGMA, OWN_SIGMA, compute_factor, cross_checks

    f = tmp_path / "p.csv"
    f.write_text("# comment\nnode_id,measured_on,tdp_W,power_limit_W,workload,metric,value,unit,relative_to_tdp,"
                 "source,source_detail,as_of\n"
                 "h100-sxm,H100,700,350,w,average SM clock,900,MHz,0.5,S,d,2026\n"
                 "h100-sxm,H100,700,525,w,average SM clock,1500,MHz,0.8,S,d,2026\n"
                 "h100-sxm,H100,700,350,llm,training throughput,1,tok/s,0.3,T,d,2026\n")
    assert compute_factor("h100-sxm", 700, 700, f).value == 1.0 == compute_factor("h100-sxm", 700, 900, f).value
    mid = compute_factor("h100-sxm", 700, 437.5, f)  # halfway between 50% and 75% of TDP
    assert mid.value == pytest.approx(0.65) and mid.rel_sigma == OWN_SIGMA and "S" in mid.source
    assert compute_factor("h100-sxm", 700, 612.5, f).value == pytest.approx(0.9)  # halfway from 75% to TDP
    other = compute_factor("b200", 1000, 625, f)  # 62.5% of its TDP on H100's curve
    assert other.value == pytest.approx(0.65) and other.rel_sigma == CARRIED_SIGMA
    assert "carried to b200 at the same fraction of its TDP" in other.source
    with pytest.raises(ModelInputError, match=r"power_limit_w: 300 W is 43% of h100-sxm's 700 W TDP, below the "
                                              r"lowest published point of the curve \(50% of TDP"):
        compute_factor("h100-sxm", 700, 300, f)
    for bad in (0, -5, float("nan"), True):
        with pytest.raises(ModelInputError, match="power_limit_w: must be a positive number"):
            compute_factor("h100-sxm", 700, bad, f)
    assert [r["source"] for r in cross_checks(f)] == ["T"]
    # the calibration: compute rates scaled, bandwidth and collectives kept; the same object at TDP
    h = calibrate(cat.get("h100-sxm"))
    capped = h.with_power_limit(500, 700, "stated")
    k = compute_factor("h100-sxm", 700, 500).value
    assert capped.matmul_eff_max["bf16"].value == pytest.approx(h.matmul_eff_max["bf16"].value * k)
    assert capped.attention_eff.value == pytest.approx(h.attention_eff.value * k)
    assert capped.mem_bw == h.mem_bw and capped.comms == h.comms and h.with_power_limit(700, 700, "x") is h
    assert capped.matmul_eff_max["bf16"].rel_sigma > h.matmul_eff_max["bf16"].rel_sigma
    assert "power_limit" in capped.sources() and "power_limit" not in h.sources()


def test_validation_fits_no_factor_on_a_run_of_an_unstated_power_limit():
    """A row whose power_limit_W is 'unstated' (the source says power limited, not to what) is scored but not fitted
    on: its held-out error is the same whatever its own figure (a fitted row moves the family fit it is in)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    n = len(V.GRID)
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 0.05, size=(6, n))
    preds = [{"fam": "f", "hw": f"h{i}", "id": f"r{i}", "fit": i != 5} for i in range(6)]

    def errs(shift):
        le = base.copy()
        le[5] += shift  # the unstated row: far off, whichever way
        return V.held_out(preds, le, lambda p, i: i)[0]
    a, b = errs(1.0), errs(-1.0)
    assert np.allclose(a[:5], b[:5])  # the others' held-out errors do not see it
    assert a[5] != b[5]  # it is still scored
    assert list(V.fit_mask(preds)) == [True] * 5 + [False]


def test_power_limit_model_tracks_a_published_llm_training_run_under_caps():
    """The power-limit check of the validation: the step model's throughput ratio to TDP at each published cap
    (compute at the SM-clock curve's ratio) against another paper's Llama 3 8B training tokens/s ratio on H100,
    within 12% at every cap from 200 W and 5% from 400 W (it was at most 10.6% and 3.7% when written)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    pts = V.power_limit_check(V.default_catalog())["points"]
    assert len(pts) >= 5 and {p["node"] for p in pts} == {"h100-sxm"}
    for p in pts:
        assert abs(p["error"]) < (0.05 if p["power_limit_W"] >= 400 else 0.12), p


def test_pipeline_hops_are_priced_by_where_the_neighbouring_stage_sits():
    """Megatron's rank order puts pipeline neighbours tp x cp x dp ranks apart: on an NVL72 domain four TP 4 x DP 4
    stages share one rack and only the hops between racks cross the network; the slowest stage (one at a rack's
    edge) exchanges over one network hop and one NVLink hop, not two network hops."""
    from hwmodels.predict.layout import Layout, pp_hops

    assert pp_hops(Layout(dp=4, tp=4, pp=16), scale_up=72, accelerators_per_node=4) == ("inter", "intra")
    assert pp_hops(Layout(dp=2, tp=8, pp=8), scale_up=8, accelerators_per_node=8) == ("inter", "inter")
    assert pp_hops(Layout(dp=1, tp=2, pp=4), scale_up=8, accelerators_per_node=8) == ("intra", "intra")
    assert pp_hops(Layout(dp=1, tp=4, pp=4), scale_up=8, accelerators_per_node=8) == ("inter", "intra")
    assert pp_hops(Layout(dp=1, tp=4, cp=2, pp=4), scale_up=8, accelerators_per_node=8) == ("inter", "inter")
    # a 64-GPU stage on a 72-GPU domain: ranks 8..63 of the second stage have both neighbours in other racks
    assert pp_hops(Layout(dp=8, tp=4, cp=2, pp=8), scale_up=72, accelerators_per_node=4) == ("inter", "inter")
    assert pp_hops(Layout(dp=4, tp=4, cp=2, pp=8), scale_up=72, accelerators_per_node=4) == ("inter", "intra")
    cal = calibrate(default_catalog().get("gb200-nvl72"))
    spec = parse_spec("llama3-405b")
    kw = dict(tp=4, pp=16, interleave=8, micro_batch=1, sharding="zero1", recompute="none", sequence_parallel=True,
              precision="fp4")
    rack = step_times(spec, cal, Layout(dp=4, **kw), global_batch=1536)
    # the same layout where every stage fills a domain of its own: both hops cross the network
    apart = step_times(spec, replace(cal, scale_up_size=16), Layout(dp=4, **kw), global_batch=1536)
    inside = step_times(spec, replace(cal, scale_up_size=256), Layout(dp=4, **kw), global_batch=1536)
    assert inside.comm_total < rack.comm_total < apart.comm_total
    assert rack.compute == pytest.approx(apart.compute)


def test_default_attention_rate_counts_the_share_of_a_wide_matrix_unit_it_fills(cat):
    """Head dimension 128 on TPU v6e's 256x256 MXU fills half of it: the assumed default attention rate is halved
    there, kept on the 128-wide v5e, and a node with a published attention figure keeps its figure whatever its
    matrix unit."""
    from hwmodels.predict.calibration import ATTENTION_HEAD_DIM, ATTN_EFF_DEFAULT

    v6e, v5e = calibrate(cat.get("tpu-v6e")), calibrate(cat.get("tpu-v5e"))
    assert v6e.attention_eff.value == pytest.approx(ATTN_EFF_DEFAULT * ATTENTION_HEAD_DIM / 256)
    assert "matrix_unit_dim" in v6e.attention_eff.source and v6e.attention_eff.kind == "datasheet"
    assert v5e.attention_eff.value == pytest.approx(ATTN_EFF_DEFAULT)
    h100 = cat.get("h100-sxm")
    assert calibrate(replace(h100, matrix_unit_dim=256)).attention_eff == calibrate(h100).attention_eff
    # the step prices the v6e attention core at half the rate: same FLOPs, twice the time
    assert v6e.attention_time(1e15, 8192, "bf16") == pytest.approx(
        2 * replace(v6e, attention_eff=replace(v6e.attention_eff, value=ATTN_EFF_DEFAULT)).attention_time(
            1e15, 8192, "bf16"))


def _pair_preds(targets_and_preds):
    """Synthetic validation rows for ranking_reliability: (hardware, model, published, predicted) per row."""
    from types import SimpleNamespace

    preds, tps = [], []
    for hw, model, pub, pred in targets_and_preds:
        preds.append({"id": f"{hw}-{model}", "hw": hw, "target": pub, "n": 8, "gb": 64,
                      "row": {"model": model, "precision": "bf16"},
                      "spec": SimpleNamespace(seq_len=4096)})
        tps.append(pred)
    return preds, np.array(tps, dtype=float)


def test_ranking_reliability_bins_pairs_by_predicted_gap_and_scores_their_order():
    """Pairs of two types at the same model and scale only; a pair lands in the bin of its PREDICTED gap and counts
    as right when the predicted order is the published one; published ties (within 2%) are left out of the bins but
    not of the ratio error."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    preds, tps = _pair_preds([
        ("a", "m1", 100.0, 100.0), ("b", "m1", 110.0, 103.0),   # predicted 3% apart, right order
        ("c", "m1", 150.0, 90.0),                               # vs a: predicted 10% (a faster), published c faster
        ("a", "m2", 100.0, 100.0), ("b", "m2", 101.0, 150.0),   # a published tie, predicted 50% apart
        ("a", "m3", 100.0, 100.0), ("a", "m3", 200.0, 100.0),   # same hardware: not a pair
    ])
    r = V.ranking_reliability(preds, tps)
    assert r["pairs"] == 4 and r["ties_left_out"] == 1
    bins = {b["gap_lo"]: (b["ordered_right"], b["pairs"]) for b in r["bins"]}
    assert bins[0.0] == (1, 1)          # a-b m1: predicted 3% apart, in the published order
    assert bins[0.10] == (0, 2)         # a-c (100/90) and b-c (103/90) m1: 11% and 14%, both the wrong way
    assert bins[0.35] == (0, 0)         # the m2 tie is predicted 50% apart but has no order to get right
    # the ratio error counts every pair, the tie too
    errs = sorted(abs(math.log(q) - math.log(t)) for q, t in (
        (100 / 103, 100 / 110), (100 / 90, 100 / 150), (103 / 90, 110 / 150), (100 / 150, 100 / 101)))
    assert r["ratio_error"]["q50"] == pytest.approx(math.expm1(np.quantile(errs, 0.5)))
    assert max(errs) == pytest.approx(math.log(100 / 90) - math.log(100 / 150))  # a-c: 11% one way, 50% the other
    assert sorted(errs)[1] == pytest.approx(math.log(150 / 101))  # the tie, predicted 50% apart, counts here


def test_ranking_and_its_order_record_leave_out_the_same_published_ties():
    """One tie rule for both: a published ratio of 1.019 either way round is a tie, 1.021 is not; the ranking's pair
    count and the order record's (pairs less ties) agree at the edge (the ranking once used |r - 1| < 2%, the
    record |log r| < log 1.02, which differ for r in (0.980, 0.9804))."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    assert V.published_tie(101.9, 100.0) and V.published_tie(100.0, 101.9)
    assert not V.published_tie(102.1, 100.0) and not V.published_tie(100.0, 102.1)
    # 98.03 is 1.97% below 100 (a tie by |r - 1|) but 100 / 98.03 = 1.0201 (not one by the ratio either way round)
    assert V.published_tie(98.1, 100.0) and not V.published_tie(98.03, 100.0)
    preds, tps = _pair_preds([
        ("a", "m1", 100.0, 100.0), ("b", "m1", 98.1, 120.0),    # a tie: left out of both
        ("a", "m2", 100.0, 100.0), ("b", "m2", 98.03, 120.0),   # the old rules' sliver: scored by both
    ])
    r, rel = V.ranking(preds, tps), V.ranking_reliability(preds, tps)
    assert r["pairs"] == sum(b["pairs"] for b in rel["bins"]) == rel["pairs"] - rel["ties_left_out"] == 1
    assert r["correct"] == 0 and r["wrong"] == ["a-m2 vs b-m2"]


def test_order_record_reads_the_bin_of_the_gap_and_the_scoring_of_the_pair(tmp_path):
    """Leave-one-out record where both types have published rows, leave-one-hardware-out where either lacks
    them; the bin the predicted gap falls in; too few pairs never 'hold'; None without the section."""
    import json

    from hwmodels.predict.predictor import MIN_RANKING_PAIRS, has_validation_rows, order_record

    def sec(right_small, right_big):
        return {"scored_with": "x", "ratio_error": {"q90": 0.25},
                "bins": [{"gap_lo": 0.0, "gap_hi": 0.1, "pairs": 20, "ordered_right": right_small},
                         {"gap_lo": 0.1, "gap_hi": None, "pairs": 50, "ordered_right": right_big}]}
    f = tmp_path / "e.json"
    f.write_text(json.dumps({"known_hardware_band": {"per_hardware": {"h": {"n": 9}, "few": {"n": 2}}},
                             "ranking_reliability": {"known": sec(19, 50), "new": sec(12, 40)}}))
    assert has_validation_rows("h", f) and not has_validation_rows("few", f) and not has_validation_rows("x", f)
    k = order_record(0.05, new_type=False, path=f)
    assert (k.pairs, k.ordered_right, k.gap_hi, k.ratio_error_q90) == (20, 19, 0.1, 0.25) and k.holds(0.9)
    n = order_record(0.05, new_type=True, path=f)
    assert n.ordered_right == 12 and not n.holds(0.9) and n.bin_label() == "0% to 10%"
    big = order_record(3.0, new_type=True, path=f)
    assert big.gap_lo == 0.1 and big.gap_hi is None and big.holds(0.8) and not big.holds(0.9)
    assert big.bin_label() == "10% or more"
    assert order_record(-0.05, new_type=False, path=f).pairs == 20  # the size of the gap, either direction
    few = tmp_path / "few.json"
    few.write_text(json.dumps({"ranking_reliability": {"known": {"bins": [
        {"gap_lo": 0.0, "gap_hi": None, "pairs": MIN_RANKING_PAIRS - 1, "ordered_right": MIN_RANKING_PAIRS - 1}]}}}))
    assert not order_record(0.2, new_type=False, path=few).holds(0.5)
    assert order_record(0.2, new_type=False, path=tmp_path / "none.json") is None


def test_a_smaller_board_shrinks_an_hgx_domain_and_keeps_a_rack_scale_one(cat):
    """Calibration.with_node_size: 4 of an 8-GPU HGX type -> node and NVLink domain of 4, on every link level;
    a GB200 NVL72 node of 2 keeps its 72-GPU domain; more than the catalog's node, or not a whole number, is
    refused naming the field."""
    h200 = calibrate(cat.get("h200-sxm"))
    four = h200.with_node_size(4, source="test")
    assert (four.accelerators_per_node, four.scale_up_size) == (4, 4)
    assert all(lc.link.accelerators_per_node == 4 and lc.link.scale_up_size == 4 for lc in four.comms.values())
    assert h200.with_node_size(h200.accelerators_per_node, source="test") is h200
    gb = calibrate(cat.get("gb200-nvl72"))
    two = gb.with_node_size(2, source="test")
    assert two.accelerators_per_node == 2 and two.scale_up_size == gb.scale_up_size == 72
    for bad in (0, 9, 2.5, True):
        with pytest.raises(ModelInputError, match="accelerators_per_node"):
            h200.with_node_size(bad, source="test")


def test_validation_prices_a_stated_smaller_node_and_the_source_attention(cat):
    """A training_runs row with accelerators_per_node prices the board it names (Calibration.with_node_size), and
    set 24's sources get the attention their date fixes: materialized for GPT-NeoX-20B, FlashAttention v1 for
    flash-attention's 2022 training table."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    with open(REPO / "data" / "reference" / "training_runs.csv", newline="") as f:
        rows = {r["run_id"]: r for r in csv.DictReader(f)}
    picked = [rows["kempnerforge-h200-7b-g8-tp4-fsdp2"], rows["neox20b-a100-40gb-g96"],
              rows["fa2train-a100-gpt3-1.3b-g8"]]
    preds, skipped = V.prepare(picked, cat)
    assert not skipped and len(preds) == 3
    kf, neox, fa = preds
    assert (kf["cal"].accelerators_per_node, kf["cal"].scale_up_size) == (4, 4)
    assert neox["core"] == "materialized" and fa["attn"] == "flash_attn_1"
    plain = dict(rows["kempnerforge-h200-7b-g8-tp4-fsdp2"], accelerators_per_node="")
    assert V.prepare([plain], cat)[0][0]["cal"].accelerators_per_node == 8


def test_speed_benchmark_clears_every_predictor_cache(capsys):
    """benchmarks/predict_speed.py times cold repeats: clear_caches empties every lru_cache of the hwmodels modules
    (the collective-curve fits and the data files read included, which an earlier version left warm), and a small
    run prints the calibrating and searching split."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predict_speed as S
    from hwmodels.predict import calibration as C, collectives, predictor as P
    from hwmodels.predict.spec import parse_spec
    from hwmodels.catalog import default_catalog
    from hwmodels.predict.search import search_all

    search_all(parse_spec("llama3-8b"), [default_catalog().get("h100-sxm")], accelerators=64)
    warm = [f for f in (C._fit_curve, C._gemm_eff, C._read_csv, P._layer_cost, collectives._params)
            if hasattr(f, "cache_info")]
    assert len(warm) == 5 and all(f.cache_info().currsize > 0 for f in warm)
    assert S.clear_caches() >= 10
    assert all(f.cache_info().currsize == 0 for f in warm)
    assert S.main(["--accelerators", "64", "--model", "llama3-8b", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "caches cleared before each" in out and "calibrating" in out and "search alone" in out


def test_layer_ops_kept_per_shape_are_the_ops_model():
    """predictor._layer_ops (the per-shape ops a search prices on every node type) is ops.layer_ops, as a tuple."""
    from hwmodels.predict import ops as O, predictor as P
    from hwmodels.predict.spec import parse_spec
    spec = parse_spec("llama3-70b")
    for kw in ({"tp": 8, "mb": 1, "seq": 8192, "recompute": "none", "sp": True, "attention": "flash",
                "precision": "fp8", "cp": 2},
               {"tp": 1, "mb": 4, "seq": 2048, "recompute": "full", "sp": False, "attention": "materialized",
                "precision": "bf16", "cp": 1}):
        got = P._layer_ops(spec, kw["tp"], kw["mb"], kw["seq"], kw["recompute"], kw["sp"], kw["attention"],
                           kw["precision"], kw["cp"])
        want = O.layer_ops(spec, micro_batch=kw["mb"], seq_len=kw["seq"], tp=kw["tp"], sp=kw["sp"],
                           recompute=kw["recompute"], attention=kw["attention"], precision=kw["precision"],
                           cp=kw["cp"])
        assert isinstance(got, tuple) and [O._asdict(o) for o in got] == [O._asdict(o) for o in want]


def test_nothing_fits_prices_the_fastest_layout_within_the_memory_error(tmp_path):
    """Where no layout fits by the memory model's point estimate, the search prices the fastest one whose estimate is
    within the model's held-out q90 error of the capacity (SearchResult.within_error, marked as not fitting, saying
    so); far beyond that error none is priced; without a memory validation file none is either."""
    import json

    from hwmodels.predict.predictor import memory_held_out_error
    from hwmodels.predict.search import memory_plausible_capacity

    cat = default_catalog()
    node = cat.get("a100-80gb-sxm")
    cal = calibrate(node)
    rel, _ = memory_held_out_error(None)
    assert rel is not None and memory_plausible_capacity(80e9) == (pytest.approx(80e9 * (1 + rel)), rel)
    spec = preset("llama2-70b")
    # ZeRO-1, TP 8 x PP 2, no recomputation on 16 GPUs: no layout fits 80 GB (the least needs 1.04x), but within
    # the memory error some do, and the fastest of those is priced; on 8 GPUs (the least 1.9x) none is
    res = search(spec, cal, hardware=node.id, accelerators=16, global_batch=64, sharding="zero1", tp=8, pp=2,
                 recompute="none")
    assert res.best is None and res.within_error is not None
    w = res.within_error
    assert not w.fits and node.memory_capacity_bytes < w.memory.total <= node.memory_capacity_bytes * (1 + rel)
    assert "within the model's held-out q90 error" in w.notes[-1] and "at micro-batch 1" in w.notes[-1]
    assert w.layout.micro_batch == 1  # none stated: the smallest micro-batch
    assert res.to_dict()["within_error"]["layout"] == w.layout.to_dict()
    far = search(spec, cal, hardware=node.id, accelerators=8, global_batch=64, sharding="zero1", tp=8, pp=1,
                 recompute="none")
    assert far.best is None and far.within_error is None and far.smallest_memory is not None
    assert res.least_memory is None  # priced only when nothing is within the error
    lm = far.least_memory  # the least-memory layout, priced by the search, marked as not fitting
    assert lm is not None and not lm.fits and lm.layout == far.smallest_memory[0]
    assert lm.memory.total == pytest.approx(far.smallest_memory[1].total)
    assert "least-memory layout, priced anyway" in lm.notes[-1]
    assert far.to_dict()["least_memory"]["layout"] == lm.layout.to_dict()
    empty = tmp_path / "mem.json"
    empty.write_text(json.dumps({}))
    assert memory_plausible_capacity(80e9, empty) == (80e9, None)
    none = search(spec, cal, hardware=node.id, accelerators=16, global_batch=64, sharding="zero1", tp=8, pp=2,
                  recompute="none", memory_error_path=empty)
    assert none.best is None and none.within_error is None


def test_unfit_rule_report_scores_the_three_rules():
    """unfit_rule_report: each row where nothing with the stated fields fits carries its priced error and the other
    two rules' errors, scaled by their layouts' throughput over the priced one's."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import predictor_validation as V
    from hwmodels.predict.layout import Layout

    cal = calibrate(default_catalog().get("h100-sxm"))
    spec = preset("llama2-70b")
    base = dict(dp=4, tp=8, pp=2, micro_batch=1, sharding="zero1", precision="bf16")
    priced, least, ignore = (Layout(**base, recompute=r) for r in ("selective", "full", "none"))
    p = {"id": "r", "spec": spec, "cal": cal, "layout": priced, "least_layout": least, "ignore_layout": ignore,
         "gb": 64, "n": 64, "core": "flash"}
    g = V.GRID.index((1.0, 1.0, 0.0))
    rep = V.unfit_rule_report([p, {"least_layout": None}], np.array([0.1, 0.0]), g)
    r = rep["rows"]["r"]
    assert rep["n"] == 1 and r["priced"] == pytest.approx(0.1)
    assert r["least_memory"] == pytest.approx(1.1 * V.tps_at(p, least, g) / V.tps_at(p, priced, g) - 1)
    assert r["least_memory"] < 0.1 < r["fastest_ignoring_memory"]  # full recompute slower, none faster
    assert rep["median_abs_priced"] == pytest.approx(0.1)
