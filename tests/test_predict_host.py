"""Host dispatch in the step model: the ``dispatch`` probe, its calibration, and the op counts it multiplies.

The op counts of ``hwmodels.predict.spec`` are checked against the autograd graphs of the suite's own torch
models (``workloads/torch/models.py``), so a model change that adds ops fails here rather than in a benchmark.
"""

from __future__ import annotations

import math

import pytest

from hwcore.errors import InputError
from hwmodels.catalog import default_catalog
from hwmodels.errors import ModelInputError
from hwmodels.predict import KernelPoint, calibrate
from hwmodels.predict import ops as O
from hwmodels.predict.calibration import STEP_OVERHEAD_S
from hwmodels.predict.predictor import generic_step_time, host_bound_overhead, predict_workload, step_times
from hwmodels.predict.layout import Layout
from hwmodels.predict.spec import from_workload

torch = pytest.importorskip("torch")


def _graph_nodes(loss) -> int:
    """Autograd nodes behind ``loss`` (gradient accumulators of leaves excluded)."""
    seen, stack, n = set(), [loss.grad_fn], 0
    while stack:
        f = stack.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        n += type(f).__name__ != "AccumulateGrad"
        stack.extend(g for g, _ in f.next_functions)
    return n


@pytest.mark.parametrize("layers,width,heads,seq", [(1, 64, 4, 32), (3, 64, 4, 32), (2, 96, 3, 16)])
def test_transformer_host_ops_match_the_torch_graph(layers, width, heads, seq):
    from workloads.torch.models import TransformerLM

    m = TransformerLM(layers=layers, width=width, heads=heads, seq_len=seq, vocab=256, mlp_ratio=4)
    loss = m.loss(torch.randint(0, 256, (2, seq)), torch.randint(0, 256, (2, seq)))
    s = from_workload("transformer_lm", {"layers": layers, "width": width, "heads": heads, "seq_len": seq})
    assert s.host_ops_per_layer() * layers + s.host_ops_outside_layers() == _graph_nodes(loss)
    assert s.param_tensors() == len(list(m.parameters()))


@pytest.mark.parametrize("hidden,layers,context", [(32, 1, 64), (16, 2, 10), (8, 3, 24)])
def test_gru_host_ops_match_the_torch_graph(hidden, layers, context):
    from workloads.torch.models import GRUForecaster

    m = GRUForecaster(hidden=hidden, layers=layers, horizon=8)
    loss = m.loss(torch.randn(4, context, 1), torch.randn(4, 8))
    s = from_workload("timeseries_forecaster", {"hidden": hidden, "layers": layers, "context": context})
    n = _graph_nodes(loss)
    assert abs(s.host_ops() - n) <= 0.03 * n, (s.host_ops(), n)  # 14 per cell step dominate
    assert s.param_tensors == len(list(m.parameters()))


@pytest.mark.parametrize("hidden,depth", [(64, 2), (32, 3)])
def test_mlp_host_ops_match_the_torch_graph(hidden, depth):
    from workloads.torch.models import MLPRegressor

    s = from_workload("mlp_regressor", {"hidden": hidden, "depth": depth})
    m = MLPRegressor(features=8, hidden=hidden, depth=depth)
    loss = m.loss(torch.randn(4, 8), torch.randn(4, 1))
    assert s.host_ops() == _graph_nodes(loss)
    assert s.param_tensors == len(list(m.parameters()))


def _points(per_op=10e-6, fwd=2e-6, opt=((4, 300e-6), (16, 500e-6))):
    pts = [KernelPoint(kernel="dispatch", params={"mode": "train", "ops": 32},
                       metrics={"median_s": 32 * per_op, "per_op_s": per_op}),
           KernelPoint(kernel="dispatch", params={"mode": "forward", "ops": 32},
                       metrics={"median_s": 32 * fwd, "per_op_s": fwd})]
    pts += [KernelPoint(kernel="dispatch", params={"mode": "optimizer", "tensors": k},
                        metrics={"median_s": t, "per_step_s": t}) for k, t in opt]
    return pts


def test_calibration_reads_the_dispatch_probes():
    cpu = default_catalog().get("cpu-epyc-zen4-2c")
    cal = calibrate(cpu, _points(), use_published=False)
    assert cal.host_op_s.value == pytest.approx(10e-6) and cal.host_op_s.kind == "measured"
    assert cal.launch_s.value == pytest.approx(2e-6) and cal.launch_s.kind == "measured"
    assert cal.optimizer_host_time(4) == pytest.approx(300e-6)
    assert cal.optimizer_host_time(10) == pytest.approx(400e-6)  # linear between the points
    assert cal.optimizer_host_time(28) == pytest.approx(700e-6)  # and beyond
    assert cal.host_time(100, 16) == pytest.approx(100 * 10e-6 + 500e-6)
    assert "host_dispatch_per_op" in cal.sources() and "optimizer_host" in cal.sources()
    one = calibrate(cpu, _points(opt=((8, 400e-6),)), use_published=False)
    assert one.optimizer_host_time(2) == one.optimizer_host_time(64) == pytest.approx(400e-6)
    assert calibrate(cpu, [], use_published=False).host_op_s is None


def test_host_time_enters_a_cpu_step_in_full_and_a_gpu_step_beyond_its_device_work():
    cpu = default_catalog().get("cpu-epyc-zen4-2c")
    spec = from_workload("transformer_lm", {"layers": 2, "width": 64, "heads": 4, "seq_len": 64})
    lay = Layout(dp=1, micro_batch=16, sharding="none", recompute="none", precision="fp32")
    with_probe = step_times(spec, calibrate(cpu, _points(), use_published=False), lay, global_batch=16)
    without = step_times(spec, calibrate(cpu, [], use_published=False), lay, global_batch=16)
    n_ops = 2 * 31 + 11
    cal = calibrate(cpu, _points(), use_published=False)
    expect = cal.step_overhead_s.value + n_ops * 10e-6 + cal.optimizer_host_time(spec.param_tensors())
    assert with_probe.overhead == pytest.approx(expect)
    assert without.overhead == pytest.approx(cal.step_overhead_s.value)
    # two micro-batches dispatch the forward/backward twice, the optimizer once
    two = step_times(spec, cal, Layout(dp=1, micro_batch=8, sharding="none", recompute="none", precision="fp32"),
                     global_batch=16)
    assert two.overhead - with_probe.overhead == pytest.approx(n_ops * 10e-6)
    # full recompute dispatches each layer's forward again at the forward (no_grad) floor
    ck = step_times(spec, cal, Layout(dp=1, micro_batch=16, sharding="none", recompute="full", precision="fp32"),
                    global_batch=16)
    assert ck.overhead - with_probe.overhead == pytest.approx(2 * 31 * 2e-6)
    # a GPU queues kernels asynchronously: per phase (forward + backward; the optimizer), the host's time counts
    # only beyond that phase's device work, so this tiny model is host-bound there and a large one is not; with
    # the host's work measured, the fixed per-step guess (STEP_OVERHEAD_S) gives way to two launch floors
    gpu = default_catalog().get("h100-sxm")
    gcal = calibrate(gpu, _points())
    assert gcal.step_overhead_s.value == pytest.approx(2 * 2e-6) and gcal.step_overhead_s.kind == "measured"
    assert calibrate(gpu, []).step_overhead_s.value == pytest.approx(STEP_OVERHEAD_S)
    g1 = step_times(spec, gcal, lay, global_batch=16)
    opt = O.optimizer_op(spec.n_params(), "fp32")
    d_opt = gcal.memory_time(opt.nbytes, opt.launches)
    host_fb, host_opt = n_ops * 10e-6, gcal.optimizer_host_time(spec.param_tensors())
    device_fb = g1.compute + g1.memory_bound - d_opt + g1.exposed_comm + g1.bubble
    assert host_fb > device_fb and host_opt > d_opt
    assert g1.overhead == pytest.approx(2 * 2e-6 + host_fb - device_fb + host_opt - d_opt)
    big = from_workload("transformer_lm", {"layers": 8, "width": 2048, "heads": 16, "seq_len": 2048})
    b1 = step_times(big, gcal, lay, global_batch=16)
    assert b1.overhead == pytest.approx(gcal.step_overhead_s.value)
    assert host_bound_overhead(gcal, ((0.004, 0.001), (0.001, 0.004))) == pytest.approx(0.003)  # not pooled
    assert host_bound_overhead(cal, ((0.004, 0.001), (0.001, 0.004))) == pytest.approx(0.005)  # a CPU pays all


def test_generic_step_charges_the_gru_cell_ops():
    cpu = default_catalog().get("cpu-epyc-zen4-2c")
    cal = calibrate(cpu, _points(), use_published=False)
    spec = from_workload("timeseries_forecaster", {"hidden": 32, "layers": 1, "context": 64})
    b = generic_step_time(spec, cal, batch=32)
    assert b["overhead"] == pytest.approx(cal.step_overhead_s.value + spec.host_ops() * 10e-6
                                          + cal.optimizer_host_time(spec.param_tensors))
    assert spec.host_ops() >= 64 * 14
    assert all(math.isfinite(v) for v in b.values())
    # on a GPU cuDNN runs the recurrent loop inside one call: its steps dispatch no ops, each launches two kernels
    # (forward, backward) per recurrent op, charged at the launch floor
    gcal = calibrate(default_catalog().get("h100-sxm"), _points())
    assert spec.host_ops(serial=False) == spec.host_ops() - 64 * 14 and spec.sequential_launches() == 2 * 2 * 64
    g = generic_step_time(spec, gcal, batch=32)
    host_fb = spec.host_ops(serial=False) * 10e-6 + spec.sequential_launches() * gcal.launch_s.value
    d_opt = gcal.memory_time(spec.params * 28.0, 4.0)
    host_opt = gcal.optimizer_host_time(spec.param_tensors)
    assert g["overhead"] == pytest.approx(gcal.step_overhead_s.value + max(host_fb - (g["compute"] + g["memory_bound"]
                                                                                      - d_opt), 0.0)
                                          + max(host_opt - d_opt, 0.0))
    assert spec.sequential_launches() * gcal.launch_s.value < 64 * 14 * 10e-6  # far below a per-op dispatch


@pytest.mark.parametrize("mode", ["forward", "train", "optimizer"])
def test_dispatch_kernel_runs_and_is_checked(mode):
    from kernels import registry as R

    r = R.run("dispatch", {"mode": mode, "ops": 8, "tensors": 3}, record=False, warmup_ms=5, measure_ms=20)
    d = r.to_json()
    assert d["status"] == "ok" and d["median_s"] > 0
    if mode == "optimizer":
        assert d["per_step_s"] == pytest.approx(d["median_s"])
    else:
        assert d["per_op_s"] == pytest.approx(d["median_s"] / 8)


def test_dispatch_kernel_refuses_bad_sizes():
    from kernels import registry as R

    with pytest.raises(InputError, match="dispatch.ops"):
        R.validate_params("dispatch", {"ops": 5000}, device="cpu")
    with pytest.raises(InputError, match="mode"):
        R.validate_params("dispatch", {"mode": "backward"}, device="cpu")


def test_committed_term_is_billed_in_full_by_predict_as_by_the_report():
    from hwmodels.catalog import default_catalog as cat
    from hwmodels.predict import predict_job

    node = next(n for n in cat() if "reserved" in n.modes and n.pricing["reserved"].min_billed_hours >= 8766)
    term_h = node.pricing["reserved"].min_billed_hours
    price = node.price_per_accelerator_hour("reserved")
    short = predict_job(hardware=node, accelerators=8, model="d_model=2048,n_layers=16,n_heads=16,vocab=32000", tokens=1e9, pricing="reserved")
    p = short.best
    assert p.accelerator_hours < 8 * term_h  # a 1B-token job is far shorter than the term
    assert p.cost_usd == pytest.approx(8 * term_h * price)
    lo, hi = p.interval["cost_usd"]
    assert lo == pytest.approx(p.cost_usd) and hi == pytest.approx(p.cost_usd)  # the term, whatever the speed
    assert any("committed term" in n for n in p.notes)
    od = predict_job(hardware=node, accelerators=8, model="d_model=2048,n_layers=16,n_heads=16,vocab=32000", tokens=1e9, pricing="on_demand").best
    assert od.cost_usd == pytest.approx(od.accelerator_hours * node.price_per_accelerator_hour("on_demand"))
    assert not any("committed term" in n for n in od.notes)


def test_framework_factor_does_not_divide_the_attention_kernel():
    """eta covers what a framework loses around its GEMMs and element-wise kernels; the attention kernel's rate
    is already the rate of the kernel it runs, so only the rest of the compute is divided."""
    from hwmodels.predict.predictor import _head_cost, _layer_cost

    cal = calibrate(default_catalog().get("h100-sxm"), [])
    spec = from_workload("transformer_lm", {"layers": 4, "width": 1024, "heads": 8, "seq_len": 8192})
    lay = Layout(dp=1, micro_batch=1, sharding="none", recompute="none", precision="bf16")
    one = step_times(spec, cal, lay, global_batch=1, eta=1.0)
    half = step_times(spec, cal, lay, global_batch=1, eta=0.5)
    cf, cb, *_, af, ab = _layer_cost(cal, spec, 1, 1, 8192, "none", False, "flash", "bf16")
    attn = af + ab
    hf, hb, *_ = _head_cost(cal, spec, 1, 1, 8192, "bf16")
    assert attn > 0.2 * (cf + cb)  # long sequence: attention is a large share
    assert one.compute == pytest.approx(4 * (cf + cb) + hf + hb)
    assert half.compute == pytest.approx(2 * (4 * (cf + cb - attn) + hf + hb) + 4 * attn)


def test_suite_optimizer_phase_bytes_follow_torch_adamw():
    """The suite's torch optimizer phase, counted from torch's AdamW passes (ops.TORCH_*): foreach 72 B per
    parameter, + 8 with weight decay, + 12 for the gradient clip; fused 28 (+ 12)."""
    assert O.TorchOptimizer("foreach", weight_decay=False, grad_clip=True).bytes_per_param() == 84.0
    assert O.TorchOptimizer("foreach", weight_decay=True, grad_clip=True).bytes_per_param() == 92.0
    assert O.TorchOptimizer("fused", weight_decay=True, grad_clip=False).bytes_per_param() == 28.0
    assert O.optimizer_op(1e6, "bf16", O.TorchOptimizer("default")).nbytes == pytest.approx(84e6)
    assert O.optimizer_op(1e6, "bf16").nbytes == pytest.approx(30e6)  # published runs: a fused mixed-precision Adam
    with pytest.raises(ModelInputError, match="optimizer_impl"):
        O.TorchOptimizer("sgd")


def test_autocast_traffic_of_a_layer():
    """bf16 autocast over fp32 parameters: per layer (t tokens, d width, W weights) forward 2 x 10 t d (norms
    in fp32 + the cast of their output) + 2 x 4 t d (fp32 residual adds) + 6 W (weight casts); backward
    2 x 18 t d + 2 x 6 t d + 6 W; a full recompute repeats the forward part; predict_workload applies it to a
    bf16_autocast run only."""
    spec = from_workload("transformer_lm", {"layers": 2, "width": 256, "heads": 4, "seq_len": 128})
    t, d, w = 4 * 128, 256, spec.layer_params()
    ops = {o.phase: o.nbytes for o in O.autocast_ops(spec, micro_batch=4, seq_len=128, recompute="full")}
    assert ops["fwd"] == pytest.approx(28 * t * d + 6 * w) and ops["recompute"] == ops["fwd"]
    assert ops["bwd"] == pytest.approx(48 * t * d + 6 * w)
    cal = calibrate(default_catalog().get("h100-sxm"), _points())
    cfg = {"layers": 2, "width": 256, "heads": 4, "seq_len": 128, "batch_size": 4, "precision": "bf16_autocast"}
    ac = predict_workload("transformer_lm", cfg, cal, attention="flash")
    pure = predict_workload("transformer_lm", {**cfg, "precision": "bf16"}, cal, attention="flash")
    extra = sum(cal.memory_time(o.nbytes, o.launches) for o in O.autocast_ops(spec, micro_batch=4, seq_len=128))
    assert ac["breakdown_s"]["memory_bound"] - pure["breakdown_s"]["memory_bound"] == pytest.approx(2 * extra)
    assert ac["breakdown_s"]["compute"] == pytest.approx(pure["breakdown_s"]["compute"])
