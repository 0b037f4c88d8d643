"""framework=jax variants of attention, layernorm, GELU and AdamW (CPU, tiny sizes)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from hwcore.errors import InputError
from kernels import _util as U
from kernels import registry as R

FAST = {"warmup_ms": 1.0, "measure_ms": 5.0}

ATT = {"batch": 2, "heads": 3, "seq": 16, "head_dim": 8}
CASES = [
    ("attention", {**ATT}),
    ("attention", {**ATT, "causal": True}),
    ("attention", {**ATT, "causal": True, "backend": "unfused"}),
    ("attention", {**ATT, "dtype": "bf16"}),
    ("layernorm", {"rows": 16, "cols": 32}),
    ("layernorm", {"rows": 16, "cols": 32, "impl": "unfused"}),
    ("layernorm", {"rows": 16, "cols": 32, "dtype": "bf16"}),
    ("gelu", {"n": 1000}),
    ("gelu", {"n": 1000, "approximate": "tanh"}),
    ("gelu", {"n": 1000, "impl": "unfused", "approximate": "tanh"}),
    ("gelu", {"n": 1000, "impl": "unfused", "dtype": "fp16"}),
    ("adamw", {"n_params": 1000, "n_tensors": 3, "impl": "plain"}),
    ("adamw", {"n_params": 1000, "n_tensors": 3, "impl": "plain", "dtype": "bf16", "weight_decay": 0.1}),
]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _jax(raw):
    return {**raw, "framework": "jax"}


@pytest.mark.parametrize("name", ["attention", "layernorm", "softmax", "gelu", "adamw"])
def test_jax_is_a_declared_framework_and_counts_do_not_depend_on_it(name):
    k = R.get(name)
    assert k.frameworks == ("torch", "jax")
    assert R.validate_params(name, {})["framework"] == "torch"  # default unchanged
    raw = {"impl": "plain"} if name == "adamw" else {}
    pt, pj = R.validate_params(name, raw), R.validate_params(name, _jax(raw))
    assert (k.flops(pt), k.bytes(pt)) == (k.flops(pj), k.bytes(pj))


@pytest.mark.parametrize(("kernel", "raw"), CASES)
def test_jax_variants_pass_their_checks(kernel, raw):
    res = R.run(kernel, _jax(raw), record=False, **FAST)
    assert res.ok and res.framework == "jax" and res.median_s > 0
    assert res.measurement.sync == "jax"
    tol = R.get(kernel).build(R.validate_params(kernel, _jax(raw)), "cpu").tolerance
    assert res.measurement.metadata["check_error"] <= tol
    assert "jax" in res.measurement.metadata["impl"] or res.measurement.metadata["impl"] == "eager jnp ops"


def _output(kernel, raw):
    """The kernel's checked output (full tensor; attention in torch's (b, h, s, d) layout) and its tolerance."""
    p = R.validate_params(kernel, raw, device="cpu")
    s = R.get(kernel).build(p, "cpu")
    try:
        if kernel == "adamw":
            ref = s.reference()  # the check's quantity (update delta or new params)
            return U.to_f64(s.output(s.fn(*s.inputs[0]))), s.tolerance, ref
        out = s.fn(*s.inputs[0])
        out = U.to_f64(out if raw.get("framework", "torch") == "torch" else np.asarray(out))
        if kernel == "attention" and raw.get("framework") == "jax":
            out = out.transpose(0, 2, 1, 3)
        return out, s.tolerance, None
    finally:
        s.cleanup()


@pytest.mark.parametrize(("kernel", "raw"), CASES)
def test_jax_agrees_with_torch_on_the_same_inputs(kernel, raw):
    torch_raw = dict(raw)
    out_t, tol, ref = _output(kernel, torch_raw)
    out_j, _, ref_j = _output(kernel, _jax(raw))
    if ref is not None:  # same draws -> same reference
        np.testing.assert_array_equal(ref, ref_j)
    assert out_t.shape == out_j.shape
    assert np.all(np.isfinite(out_j))
    assert U.max_rel_error(out_j, out_t) <= 2 * tol  # both within tol of the fp64 reference


def test_jax_inputs_are_fresh_random_values():
    p = R.validate_params("gelu", _jax({"n": 4096}))
    (x,) = R.get("gelu").build(p, "cpu").inputs[0]
    x = np.asarray(x)
    assert np.count_nonzero(x) == x.size and 0.8 < x.std() < 1.2


# ---------------------------------------------------------------------------------
# wrong JAX kernels are rejected before timing
# ---------------------------------------------------------------------------------
def test_wrong_jax_attention_is_caught(monkeypatch, store_path):
    import kernels.fused as F

    real = F._attention_jax_auto
    monkeypatch.setattr(F, "_attention_jax_auto", lambda q, k, v, causal: 1.5 * real(q, k, v, causal))
    with pytest.raises(R.KernelCheckError, match="differs from the fp64 reference"):
        R.run("attention", _jax(ATT), **FAST)
    from hwcore.store import Store

    df = Store(store_path).records()
    assert list(df["status"]) == ["failed"]


def test_jax_attention_honours_the_causal_mask(monkeypatch):
    import kernels.fused as F

    real = F._attention_jax_unfused
    monkeypatch.setattr(F, "_attention_jax_unfused", lambda q, k, v, causal: real(q, k, v, False))
    with pytest.raises(R.KernelCheckError):
        R.run("attention", _jax({**ATT, "causal": True, "backend": "unfused"}), record=False, **FAST)


@pytest.mark.parametrize("impl", ["fused", "unfused"])
def test_wrong_jax_layernorm_is_caught(monkeypatch, impl):
    import kernels.fused as F

    real = F._layernorm_jax
    monkeypatch.setattr(F, "_layernorm_jax", lambda x, w, b: real(x, w, b) * 1.01)
    with pytest.raises(R.KernelCheckError):
        R.run("layernorm", _jax({"rows": 8, "cols": 32, "impl": impl}), record=False, **FAST)


def test_wrong_jax_gelu_is_caught(monkeypatch):
    import kernels.fused as F

    real = F._gelu_jax
    # the other approximation: a wrong mapping of torch's approximate param is caught
    monkeypatch.setattr(F, "_gelu_jax", lambda x, a: real(x, "none" if a == "tanh" else "tanh"))
    with pytest.raises(R.KernelCheckError):
        R.run("gelu", _jax({"n": 4096}), record=False, **FAST)
    monkeypatch.setattr(F, "_gelu_jax_unfused", lambda x, a: 2.0 * real(x, a))
    with pytest.raises(R.KernelCheckError):
        R.run("gelu", _jax({"n": 1000, "impl": "unfused"}), record=False, **FAST)


def test_wrong_jax_adamw_is_caught(monkeypatch):
    import kernels.optim as O

    real = O._adamw_jax_step

    def double_step(tx, params, grads, state):
        new, state = real(tx, params, grads, state)
        return [2 * n - p for n, p in zip(new, params, strict=True)], state  # twice the update

    monkeypatch.setattr(O, "_adamw_jax_step", double_step)
    with pytest.raises(R.KernelCheckError):
        R.run("adamw", _jax({"n_params": 1000, "n_tensors": 3, "impl": "plain"}), record=False, **FAST)
    # a wrong learning rate passed to optax is caught too
    monkeypatch.setattr(O, "_adamw_jax_step", real)
    real_tx = O._optax_adamw
    monkeypatch.setattr(O, "_optax_adamw", lambda lr, wd: real_tx(1.1 * lr, wd))
    with pytest.raises(R.KernelCheckError):
        R.run("adamw", _jax({"n_params": 1000, "n_tensors": 3, "impl": "plain"}), record=False, **FAST)


# ---------------------------------------------------------------------------------
# invalid combinations
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kernel", "raw", "pattern"),
    [
        ("attention", {"backend": "flash"},
         r"attention\.backend='flash' is a torch SDPA backend; valid choices for framework=jax: auto, unfused"),
        ("attention", {"backend": "math"},
         r"attention\.backend='math'.*valid choices for framework=jax: auto, unfused"),
        ("adamw", {"impl": "foreach"}, r"adamw\.impl='foreach'.*valid choices for framework=jax: plain"),
        ("adamw", {"impl": "fused"}, r"adamw\.impl='fused'.*valid choices for framework=jax: plain"),
        ("adamw", {}, r"adamw\.impl='fused'.*valid choices for framework=jax: plain"),  # torch's default impl
        ("gelu", {"framework": "tf"}, r"gelu\.framework: unknown value 'tf'; valid choices: jax, torch"),
    ],
)
def test_invalid_jax_combinations_are_one_line_input_errors(kernel, raw, pattern):
    with pytest.raises(InputError, match=pattern) as exc:
        R.validate_params(kernel, _jax(raw) if "framework" not in raw else raw)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("kernel", ["attention", "layernorm", "gelu", "adamw"])
def test_jax_fp64_without_x64_is_unsupported(kernel):
    import jax

    if jax.config.jax_enable_x64:
        pytest.skip("x64 enabled")
    raw = _jax({"dtype": "fp64", **({"impl": "plain"} if kernel == "adamw" else {})})
    with pytest.raises(R.Unsupported, match=rf"{kernel}\.dtype='fp64'.*jax_enable_x64.*valid choices here: fp32") as e:
        R.validate_params(kernel, raw, device="cpu")
    assert "\n" not in str(e.value)


def test_torch_sdpa_backends_still_valid_for_torch():
    assert R.validate_params("attention", {"backend": "math"})["framework"] == "torch"
    assert R.validate_params("adamw", {"impl": "foreach"})["impl"] == "foreach"


# ---------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------
def test_cli_bench_attention_jax(cli, store_path):
    proc = cli("bench", "attention", "--set", "framework=jax", "--set", "batch=1", "--set", "heads=2",
               "--set", "seq=32", "--set", "head_dim=16", "--set", "causal=true", "--json",
               "--warmup-ms", "1", "--measure-ms", "5")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["status"] == "ok" and d["framework"] == "jax" and d["params"]["backend"] == "auto"
    assert d["flops"] == 4 * 1 * 2 * 32**2 * 16 / 2 and d["measurement"]["sync"] == "jax"


def test_cli_bench_attention_jax_bad_backend_exits_2(cli, store_path):
    proc = cli("bench", "attention", "--set", "framework=jax", "--set", "backend=flash")
    assert proc.returncode == 2
    assert "attention.backend" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(store_path.glob("*.parquet"))
