"""workloads/: registry, configs, training on real data, FLOP accounting, faults, resume, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

import workloads
from hwcore.errors import InputError
from hwcore.store import Store, decode
from workloads import flops, registry

# small, quick runs (2-core shared machine): one intra-op thread, few steps
FAST = {"threads": 1}


def lm(**kw):
    return {"preset": "tiny", **FAST, **kw}


# ---------------------------------------------------------------------------------
# registry and configs
# ---------------------------------------------------------------------------------
def test_registry_lists_workloads_and_rejects_unknown():
    assert workloads.list_workloads() == ["mlp_regressor", "timeseries_forecaster", "transformer_lm"]
    with pytest.raises(InputError, match="no workload named 'resnet'.*mlp_regressor, timeseries_forecaster"):
        registry.get("resnet")
    for name in workloads.list_workloads():
        d = registry.get(name).describe()
        assert d["data"] and d["model"] and d["target"] and "tiny" in d["presets"]


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("transformer_lm", {"width": "66", "heads": "4"}, r"transformer_lm\.heads \(4\) must divide width \(66\)"),
        ("transformer_lm", {"depth": "3"}, r"unknown parameter 'depth'; valid parameters: preset, .*heads"),
        ("transformer_lm", {"layers": "two"}, r"transformer_lm\.layers: expected a positive integer, got 'two'"),
        ("transformer_lm", {"compile": "maybe"}, r"transformer_lm\.compile: expected a boolean"),
        ("transformer_lm", {"preset": "huge"}, r"transformer_lm\.preset: unknown value 'huge'; valid choices: "
                                               r"medium, small, tiny"),
        ("transformer_lm", {"precision": "fp8"}, r"precision: unknown value 'fp8'; valid choices: .*fp32"),
        ("transformer_lm", {"batch_size": 6, "nprocs": 4}, r"batch_size \(6\) must be divisible by nprocs \(4\)"),
        ("transformer_lm", {"batch_size": 8, "grad_accum": 3}, r"grad_accum \(3\) must divide"),
        ("transformer_lm", {"framework": "jax", "optimizer_impl": "fused"}, r"optimizer_impl: 'fused' is a torch"),
        ("transformer_lm", {"framework": "jax", "nprocs": 2}, r"nprocs: data-parallel .* framework=torch only"),
        ("mlp_regressor", {"framework": "jax"}, r"mlp_regressor\.framework: 'jax' is not implemented"),
        ("mlp_regressor", {"max_steps": 0}, r"mlp_regressor\.max_steps: expected a positive integer, got 0"),
        ("timeseries_forecaster", {"hidden": -1}, r"timeseries_forecaster\.hidden: expected a positive integer, got -1"),
    ],
)
def test_invalid_config_errors_name_the_field(name, raw, message):
    with pytest.raises(InputError, match=message):
        registry.config_from_params(name, raw)


def test_config_parsing_types_and_presets():
    cfg = registry.config_from_params("transformer_lm", {"preset": "tiny", "compile": "true", "lr": "1e-3",
                                                         "batch_size": 16.0})
    assert cfg.compile is True and cfg.lr == 1e-3 and cfg.batch_size == 16 and cfg.width == registry.lm_tiny().width
    assert registry.config_from_params("mlp_regressor", {}).hidden == registry.mlp_small().hidden  # default preset
    with pytest.raises(InputError):
        workloads.run("transformer_lm", {"heads": 5}, record=False)


# ---------------------------------------------------------------------------------
# FLOPs and parameters: analytic == torch == JAX
# ---------------------------------------------------------------------------------
def _jax_dot_flops(jaxpr) -> int:
    """FLOPs of every dot_general in a jaxpr (2 x output elements x contracted size), sub-jaxprs included."""
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lc, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            total += 2 * int(np.prod(eqn.outvars[0].aval.shape)) * int(np.prod([lhs[i] for i in lc]))
        for val in eqn.params.values():
            for sub in val if isinstance(val, list | tuple) else [val]:
                if hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    total += _jax_dot_flops(sub.jaxpr)
                elif hasattr(sub, "eqns"):
                    total += _jax_dot_flops(sub)
    return total


def test_torch_and_jax_transformer_count_the_same_flops_and_parameters():
    import jax
    import jax.numpy as jnp
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from workloads.jax.transformer import count_params, init_params, loss_fn

    cfg = registry.config_from_params("transformer_lm", {"preset": "tiny", "layers": 3, "width": 48, "heads": 3,
                                                         "seq_len": 24, "vocab": 200, "batch_size": 4})
    w = registry.get("transformer_lm")
    fc = w.flops(cfg)
    # hand count: V d + T d + L (12 d^2 + 4 d) + 2 d with mlp_ratio 4
    d, L, T, V = 48, 3, 24, 200
    assert fc.params == V * d + T * d + L * (12 * d * d + 4 * d) + 2 * d
    tokens = 4 * T
    assert fc.model_flops_per_step == 6 * (L * 12 * d * d + V * d) * tokens + 12 * L * T * d * tokens

    split = w.split(cfg)
    x, y = split.batch(0, 1, cfg.batch_size)
    module = w.torch_module(cfg, split)
    assert sum(p.numel() for p in module.parameters()) == fc.params
    # the math SDPA path decomposes attention into counted matmuls
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        module.loss(torch.from_numpy(x), torch.from_numpy(y)).backward()
    torch_flops = counter.get_total_flops()

    params = init_params(jax.random.PRNGKey(0), layers=L, width=d, heads=3, seq_len=T, vocab=V, mlp_ratio=4)
    assert count_params(params) == fc.params
    jaxpr = jax.make_jaxpr(jax.grad(lambda p, a, b: loss_fn(p, a, b, heads=3)))(params, jnp.asarray(x),
                                                                                 jnp.asarray(y))
    jax_flops = _jax_dot_flops(jaxpr.jaxpr)
    assert torch_flops == jax_flops == fc.model_flops_per_step

    ck = flops.transformer(layers=L, width=d, heads=3, seq_len=T, vocab=V, mlp_ratio=4, batch_size=4,
                           checkpointing=True)
    # recompute = one more forward of the blocks: (2 * 12 d^2 + 4 T d) per token per layer
    assert ck.hardware_flops_per_step - ck.model_flops_per_step == L * (24 * d * d + 4 * T * d) * tokens


def test_gru_and_mlp_analytic_params_match_torch():
    for name, raw in [("timeseries_forecaster", {"layers": 2, "hidden": 12}), ("mlp_regressor", {"depth": 3})]:
        cfg = registry.config_from_params(name, {"preset": "tiny", **raw})
        w = registry.get(name)
        module = w.torch_module(cfg, w.split(cfg))
        assert sum(p.numel() for p in module.parameters()) == w.flops(cfg).params


# ---------------------------------------------------------------------------------
# training on real data
# ---------------------------------------------------------------------------------
REQUIRED = ("workload", "params", "status", "steps", "steps_to_target", "time_to_target_s", "samples_per_s",
            "tokens_per_s", "mfu", "peak_mem_bytes", "breakdown_s", "loss_curve", "flops_per_step", "params_count")


@pytest.mark.parametrize("name", ["transformer_lm", "timeseries_forecaster", "mlp_regressor"])
def test_loss_goes_down_on_real_data(name, store_path):
    res = workloads.run(name, {"preset": "tiny", **FAST, "max_steps": 40, "eval_every": 20},
                        target_loss=1e-9, store=store_path)
    d = res.to_json()
    assert set(REQUIRED) <= set(d)
    assert d["status"] == "ok" and d["steps"] == 40
    curve = d["loss_curve"]
    assert [p["step"] for p in curve] == [0, 20, 40]
    assert curve[-1]["loss"] < 0.85 * curve[0]["loss"], curve
    assert all(set(p) >= {"step", "tokens", "seconds", "loss"} for p in curve)
    assert curve[-1]["seconds"] > curve[0]["seconds"] >= 0
    assert d["target_reached"] is False and "not reached within 40 steps" in d["target_reason"]
    assert set(d["breakdown_s"]) >= {"data", "forward", "backward", "optimizer", "communication"}
    assert d["breakdown_s"]["forward"] > 0 and d["breakdown_s"]["backward"] > 0
    assert d["samples_per_s"] > 0 and d["peak_mem_bytes"] > 0
    assert d["params_count"] == d["params_count_analytic"]
    if name == "transformer_lm":
        assert d["tokens_per_s"] == pytest.approx(d["samples_per_s"] * 32)
        assert curve[-1]["tokens"] == 40 * 8 * 32
    else:
        assert d["tokens_per_s"] is None
    rows = decode(Store(store_path).records(kind="workload"))
    assert list(rows["name"]) == [name] and rows["metrics"][0]["steps"] == 40


def test_jax_transformer_trains_and_reaches_target():
    res = workloads.run("transformer_lm", {"preset": "tiny", "framework": "jax", "compile": True,
                                           "max_steps": 40, "eval_every": 10}, target_loss=3.6, record=False)
    d = res.to_json()
    assert d["status"] == "ok" and d["framework"] == "jax"
    assert d["target_reached"] and d["steps_to_target"] == d["steps"] <= 40
    assert d["time_to_target_s"] == d["loss_curve"][-1]["seconds"]
    assert d["loss_curve"][-1]["loss"] <= 3.6 < d["loss_curve"][0]["loss"]
    assert d["breakdown_s"]["forward_backward"] > 0 and d["breakdown_s"]["forward"] is None
    assert d["params_count"] == d["params_count_analytic"]


def test_mfu_against_a_measured_peak():
    d = workloads.run("mlp_regressor", {"preset": "tiny", **FAST, "max_steps": 8, "peak_flops_per_s": 1e9},
                      record=False).to_json()
    assert d["mfu_measured"] == pytest.approx(d["achieved_flops_per_s"] / 1e9)
    assert d["achieved_flops_per_s"] == pytest.approx(d["flops_per_step"] * d["samples_per_s"] / 32)
    assert d["peak_note"]


def test_grad_accum_matches_one_big_batch():
    base = lm(max_steps=6, eval_every=3)
    a = workloads.run("transformer_lm", base, record=False).to_json()
    b = workloads.run("transformer_lm", {**base, "grad_accum": 2}, record=False).to_json()
    la, lb = [p["loss"] for p in a["loss_curve"]], [p["loss"] for p in b["loss_curve"]]
    np.testing.assert_allclose(la, lb, rtol=1e-4)


def test_activation_checkpointing_same_loss_and_reports_hfu():
    base = lm(max_steps=5, eval_every=5, peak_flops_per_s=1e10)
    a = workloads.run("transformer_lm", base, record=False).to_json()
    b = workloads.run("transformer_lm", {**base, "activation_checkpointing": True}, record=False).to_json()
    np.testing.assert_allclose([p["loss"] for p in a["loss_curve"]], [p["loss"] for p in b["loss_curve"]],
                               rtol=1e-5)
    assert a.get("hfu") is None and b["hfu"] > b["mfu"] > 0
    assert b["hardware_flops_per_step"] > b["flops_per_step"] == a["flops_per_step"]


@pytest.mark.parametrize("knobs", [{"precision": "bf16_autocast"}, {"precision": "bf16"},
                                   {"optimizer_impl": "fused"}, {"optimizer_impl": "default"}])
def test_precision_and_optimizer_knobs_train(knobs):
    d = workloads.run("transformer_lm", lm(max_steps=10, eval_every=10, **knobs), record=False).to_json()
    assert d["status"] == "ok"
    assert d["loss_curve"][-1]["loss"] < d["loss_curve"][0]["loss"]


@pytest.mark.slow
def test_jax_knobs_bf16_checkpointing_no_jit():
    d = workloads.run("transformer_lm", {"preset": "tiny", "framework": "jax", "compile": False,
                                         "precision": "bf16_autocast", "activation_checkpointing": True,
                                         "grad_accum": 2, "max_steps": 2, "eval_every": 2,
                                         "eval_batches": 1}, record=False).to_json()
    assert d["status"] == "ok" and d["loss_curve"][-1]["loss"] < d["loss_curve"][0]["loss"]


def test_dataloader_workers_keep_data_order():
    base = lm(max_steps=4, eval_every=2)
    a = workloads.run("transformer_lm", base, record=False).to_json()
    b = workloads.run("transformer_lm", {**base, "workers": 2}, record=False).to_json()
    assert [p["loss"] for p in a["loss_curve"]] == [p["loss"] for p in b["loss_curve"]]


# ---------------------------------------------------------------------------------
# faults and targets
# ---------------------------------------------------------------------------------
def test_injected_nan_is_diverged_and_stops_at_once(store_path):
    res = workloads.run("transformer_lm", lm(max_steps=50, inject_nan_at_step=3), store=store_path)
    assert res.status == "diverged" and res.steps == 3 and "step 3" in res.error
    rows = Store(store_path).records(kind="workload")
    assert list(rows["status"]) == ["diverged"]


@pytest.mark.slow
def test_jax_injected_nan_is_diverged():
    res = workloads.run("transformer_lm", {"preset": "tiny", "framework": "jax", "compile": True,
                                           "inject_nan_at_step": 2}, record=False)
    assert res.status == "diverged" and res.steps == 2


def test_unreachable_target_is_reported_not_hung():
    d = workloads.run("mlp_regressor", {"preset": "tiny", **FAST}, target_loss=1e-12, max_steps=5,
                      record=False).to_json()
    assert d["status"] == "ok" and d["steps"] == 5 and d["target_reached"] is False
    assert d["steps_to_target"] is None and d["time_to_target_s"] is None
    assert "not reached within 5 steps" in d["target_reason"]


def test_timeout_status(store_path):
    res = workloads.run("transformer_lm", lm(max_steps=10_000), max_time_s=0.5, target_loss=1e-9,
                        store=store_path)
    assert res.status == "timeout" and 0 < res.steps < 10_000
    assert list(Store(store_path).records()["status"]) == ["timeout"]


# ---------------------------------------------------------------------------------
# checkpoint / resume
# ---------------------------------------------------------------------------------
def _curve(d):
    return [(p["step"], p["tokens"], p["loss"], p["train_loss"]) for p in d["loss_curve"]]


@pytest.mark.parametrize("framework", ["torch", pytest.param("jax", marks=pytest.mark.slow)])
def test_resume_continues_the_loss_curve_identically(tmp_path, framework):
    extra = {"framework": framework, "compile": framework == "jax"}
    base = lm(eval_every=3, **extra) if framework == "torch" else {"preset": "tiny", "eval_every": 3, **extra}
    full = workloads.run("transformer_lm", {**base, "max_steps": 12}, target_loss=1e-9, record=False).to_json()
    first = workloads.run("transformer_lm", {**base, "max_steps": 6, "checkpoint_every": 6,
                                             "checkpoint_dir": str(tmp_path)}, target_loss=1e-9,
                          record=False).to_json()
    assert first["checkpoint_save_s"] > 0 and first["checkpoint_restore_s"] > 0
    resumed = workloads.run("transformer_lm", {**base, "max_steps": 12, "resume_from": str(tmp_path)},
                            target_loss=1e-9, record=False).to_json()
    assert resumed["resumed_from_step"] == 6 and resumed["checkpoint_restore_s"] > 0
    assert _curve(resumed) == _curve(full)
    assert _curve(first) == _curve(full)[: len(_curve(first))]


def test_resume_from_missing_checkpoint_is_input_error(tmp_path):
    with pytest.raises(InputError, match="resume_from: no checkpoint"):
        workloads.run("mlp_regressor", {"preset": "tiny", "resume_from": str(tmp_path / "none")}, record=False)


# ---------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------
def test_cli_json_keys_and_store(cli, store_path):
    r = cli("train", "mlp_regressor", "--set", "preset=tiny", "--set", "threads=1", "--max-steps", "6",
            "--target-loss", "0.5", "--json", "--store", str(store_path))
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert set(REQUIRED) <= set(d) and d["workload"] == "mlp_regressor" and d["params"]["max_steps"] == 6
    assert isinstance(d["breakdown_s"], dict) and isinstance(d["loss_curve"], list)
    assert len(Store(store_path).records(kind="workload")) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no workload named 'nope'"),
        (["transformer_lm", "--set", "heads=4", "--set", "width=66"], "heads (4) must divide width (66)"),
        (["transformer_lm", "--set", "bogus=1"], "unknown parameter 'bogus'"),
        (["transformer_lm", "--set", "noequals"], "expected key=value"),
    ],
)
def test_cli_bad_input_exits_2_one_line_nothing_written(cli, store_path, args, message):
    r = cli("train", *args, "--store", str(store_path))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not list(store_path.glob("*.parquet"))


def test_cli_diverged_exits_1_with_json(cli, store_path):
    r = cli("train", "mlp_regressor", "--set", "preset=tiny", "--set", "inject_nan_at_step=2", "--json")
    assert r.returncode == 1
    assert json.loads(r.stdout)["status"] == "diverged"


@pytest.mark.slow
def test_torch_compile_matches_eager():
    """torch.compile on CPU (inductor + gcc): same losses as eager within float tolerance."""
    base = lm(max_steps=3, eval_every=3)
    a = workloads.run("transformer_lm", base, record=False).to_json()
    b = workloads.run("transformer_lm", {**base, "compile": True}, record=False).to_json()
    assert b["status"] == "ok", b["error"]
    np.testing.assert_allclose([p["loss"] for p in b["loss_curve"]], [p["loss"] for p in a["loss_curve"]],
                               rtol=1e-3)
