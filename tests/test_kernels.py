"""kernels/: registry validation, FLOP/byte accounting, correctness checks, faults, CLI (CPU, tiny sizes)."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest

from hwcore.errors import InputError
from hwcore.store import Store
from kernels import registry as R

FAST = {"warmup_ms": 1.0, "measure_ms": 5.0}

REQUIRED = ["gemm", "gemm_max", "stream_copy", "stream_scale", "stream_add", "stream_triad", "attention",
            "layernorm", "softmax", "gelu", "adamw", "all_reduce", "all_gather", "reduce_scatter", "broadcast",
            "h2d_copy"]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_registry_has_every_kernel_the_notebooks_use():
    names = {k.name for k in R.list_kernels()}
    assert set(REQUIRED) <= names
    assert R.get("all_reduce").kind == "collective" and R.get("gemm").kind == "kernel"


# ---------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------
def test_unknown_kernel_lists_valid_names():
    with pytest.raises(InputError, match=r"no kernel named 'gemmm'; valid choices: .*gemm.*stream_triad"):
        R.get("gemmm")


def test_unknown_param_lists_valid_params():
    with pytest.raises(InputError, match=r"gemm: unknown parameter 'size'; valid choices: m, n, k, dtype"):
        R.validate_params("gemm", {"size": "3"})


@pytest.mark.parametrize(
    ("kernel", "raw", "pattern"),
    [
        ("gemm", {"m": "abc"}, r"gemm\.m: expected a positive integer"),
        ("gemm", {"m": "1.5"}, r"gemm\.m: expected a positive integer"),
        ("gemm", {"m": True}, r"gemm\.m: expected a positive integer"),
        ("gemm", {"m": "0"}, r"gemm\.m: expected a positive integer, got '0'"),
        ("attention", {"causal": "maybe"}, r"attention\.causal: expected a boolean"),
        ("adamw", {"lr": "fast"}, r"adamw\.lr: expected a number"),
        ("gemm", {"dtype": "fp33"}, r"gemm\.dtype: unknown value 'fp33'; valid choices: bf16, fp16, fp32"),
        ("adamw", {"impl": "apex"}, r"adamw\.impl: unknown value 'apex'; valid choices: foreach, fused, plain"),
    ],
)
def test_bad_values_name_the_parameter(kernel, raw, pattern):
    with pytest.raises(InputError, match=pattern) as exc:
        R.validate_params(kernel, raw)
    assert "\n" not in str(exc.value)


def test_values_are_typed_and_sizes_accept_suffixes():
    p = R.validate_params("all_reduce", {"size_bytes": "4KiB", "world_size": "2"})
    assert p["size_bytes"] == 4096 and p["world_size"] == 2 and p["dtype"] == "fp32"
    assert R.validate_params("stream_triad", {"n": "1M"})["n"] == 2**20
    assert R.validate_params("attention", {"causal": "true"})["causal"] is True
    assert R.validate_params("gemm", {"m": 64})["m"] == 64  # Python values pass too


def test_dtype_the_device_cannot_do_is_a_clear_error_listing_what_works():
    with pytest.raises(R.Unsupported, match=r"gemm\.dtype='tf32' cannot run on cpu: .*valid choices here: .*fp32"):
        R.validate_params("gemm", {"dtype": "tf32"}, device="cpu")
    with pytest.raises(R.Unsupported, match="fp8"):
        R.run("gemm", {"dtype": "fp8_e4m3", "m": 16, "n": 16, "k": 16}, record=False)
    with pytest.raises(R.Unsupported, match=r"numpy has BLAS GEMM for fp64/fp32 only"):
        R.validate_params("gemm", {"framework": "numpy", "dtype": "bf16"}, device="cpu")
    with pytest.raises(R.Unsupported, match="needs a CUDA device"):
        R.run("h2d_copy", {"size_bytes": "1KiB"}, record=False)


def test_cuda_without_gpu_is_input_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(InputError, match="no CUDA device is available; valid choices here: cpu"):
        R.run("gemm", {}, device="cuda", record=False)
    with pytest.raises(InputError, match="device: unknown value 'tpu'"):
        R.validate_params("gemm", {}, device="tpu")


def test_unsupported_sdpa_backend_is_reported():
    with pytest.raises(R.Unsupported, match=r"attention\.backend='cudnn'.*valid choices here: .*math"):
        R.validate_params("attention", {"backend": "cudnn", "seq": "16"}, device="cpu")


# ---------------------------------------------------------------------------------
# FLOP / byte accounting (hand-computed)
# ---------------------------------------------------------------------------------
def _counts(name, **raw):
    k = R.get(name)
    p = R.validate_params(name, raw)
    return k.flops(p), k.bytes(p)


def test_gemm_accounting():
    # 2*m*n*k; (m*k + k*n)*4 + m*n*4
    assert _counts("gemm", m=2, n=3, k=4) == (48.0, (8 + 12) * 4 + 6 * 4)
    assert _counts("gemm", m=2, n=3, k=4, dtype="bf16") == (48.0, (8 + 12) * 2 + 6 * 2)
    # fp8 reads 1-byte inputs, writes bf16
    assert _counts("gemm", m=16, n=16, k=32, dtype="fp8_e4m3") == (2 * 16 * 16 * 32, (512 + 512) * 1 + 256 * 2)


def test_stream_accounting_counts_read_plus_write():
    assert _counts("stream_copy", n=1000) == (0.0, 2 * 1000 * 8)
    assert _counts("stream_scale", n=1000) == (1000.0, 2 * 1000 * 8)
    assert _counts("stream_add", n=1000) == (1000.0, 3 * 1000 * 8)
    assert _counts("stream_triad", n=1000, dtype="fp32") == (2000.0, 3 * 1000 * 4)


def test_fused_and_optimizer_accounting():
    # attention: 4*b*h*s^2*d, halved when causal; bytes 4*b*h*s*d*elt
    assert _counts("attention", batch=1, heads=2, seq=8, head_dim=4) == (4 * 2 * 64 * 4, 4 * 2 * 8 * 4 * 4)
    assert _counts("attention", batch=1, heads=2, seq=8, head_dim=4, causal=True)[0] == 2 * 2 * 64 * 4
    assert _counts("layernorm", rows=3, cols=5) == (8 * 15, (2 * 15 + 2 * 5) * 4)
    assert _counts("softmax", rows=3, cols=5, dtype="bf16") == (5 * 15, 2 * 15 * 2)
    assert _counts("gelu", n=10) == (50.0, 80.0)
    assert _counts("gelu", n=10, approximate="tanh") == (90.0, 80.0)
    assert _counts("adamw", n_params=100) == (1400.0, 7 * 100 * 4)


def test_busbw_follows_nccl_tests():
    from kernels.collectives import algbw, bus_factor, busbw

    assert bus_factor("all_reduce", 2) == 1.0
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("all_gather", 4) == pytest.approx(0.75)
    assert bus_factor("reduce_scatter", 4) == pytest.approx(0.75)
    assert bus_factor("broadcast", 16) == 1.0
    assert algbw(1e9, 0.5) == 2e9
    assert busbw("all_reduce", 1e9, 0.5, 4) == pytest.approx(2e9 * 1.5)
    # the registered kernel's bytes are size * factor, so bytes_per_s is busbw
    assert _counts("all_reduce", size_bytes=4096, world_size=4) == (0.75 * 1024, 4096 * 1.5)
    assert _counts("broadcast", size_bytes=4096)[0] == 0.0
    with pytest.raises(InputError, match="valid choices"):
        bus_factor("all_to_all", 2)


def test_result_rates_and_intensity():
    res = R.run("gemm", {"m": 32, "n": 32, "k": 32}, record=False, **FAST)
    d = res.to_json()
    for key in ("kernel", "params", "median_s", "iqr_s", "n", "flops", "bytes", "flops_per_s", "bytes_per_s",
                "intensity", "noise_warning", "node_id", "status", "framework", "dtype", "measurement"):
        assert key in d
    assert d["flops"] == 2 * 32**3
    assert d["flops_per_s"] == pytest.approx(d["flops"] / d["median_s"])
    assert d["intensity"] == pytest.approx(d["flops"] / d["bytes"])
    assert d["measurement"]["metadata"]["check_error"] < 1e-5


# ---------------------------------------------------------------------------------
# correctness checks run before timing
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["fp64", "fp32", "bf16", "fp16"])
def test_gemm_passes_its_check_in_each_cpu_dtype(dtype):
    res = R.run("gemm", {"m": 48, "n": 40, "k": 64, "dtype": dtype}, record=False, **FAST)
    assert res.ok and res.measurement.metadata["check_error"] <= 1e-2


def test_wrong_gemm_is_caught_and_recorded(monkeypatch, store_path):
    import kernels.gemm as G

    def bug(a, b, c):
        import torch

        torch.mm(a, b, out=c)
        c[0, 0] += 1.0  # one wrong element
        return c

    monkeypatch.setattr(G, "_torch_mm", bug)
    with pytest.raises(R.KernelCheckError, match="differs from the fp64 reference"):
        R.run("gemm", {"m": 16, "n": 16, "k": 16}, **FAST)
    df = Store(store_path).records()
    assert list(df["status"]) == ["failed"] and "fp64 reference" in df["error"][0]


def test_wrong_triad_and_softmax_are_caught(monkeypatch):
    import torch

    import kernels.fused as F
    import kernels.stream as S

    monkeypatch.setattr(S, "_triad", lambda a, b, c: torch.add(b, c, alpha=2.0, out=a))
    with pytest.raises(R.KernelCheckError):
        R.run("stream_triad", {"n": 1000}, record=False, **FAST)
    monkeypatch.setattr(F, "_softmax_fused", lambda x, y: torch.softmax(x, 0, out=y))  # wrong axis
    with pytest.raises(R.KernelCheckError):
        R.run("softmax", {"rows": 8, "cols": 16}, record=False, **FAST)


def test_wrong_injected_kernel_never_gets_timed():
    base = R.get("stream_copy")
    timed = []

    def build(p, device):
        s = base.build(p, device)
        good = s.fn

        def fn(a, b, c):
            timed.append(1)
            out = good(a, b, c)
            out[-1] = 0.0
            return out

        s.fn = fn
        return s

    R.register(dataclasses.replace(base, name="bad_copy", build=build, module="tests"))
    try:
        with pytest.raises(R.KernelCheckError):
            R.run("bad_copy", {"n": 256}, record=False, **FAST)
        assert timed == [1]  # only the check's call: the harness never ran
    finally:
        R.unregister("bad_copy")


@pytest.mark.parametrize(
    ("kernel", "raw"),
    [
        ("gemm", {"m": 24, "n": 40, "k": 32, "framework": "numpy"}),
        ("gemm", {"m": 24, "n": 40, "k": 32, "framework": "numpy", "dtype": "fp64", "rotation": 3}),
        ("stream_copy", {"n": 4096}),
        ("stream_scale", {"n": 4096, "dtype": "fp32"}),
        ("stream_add", {"n": 4096, "dtype": "bf16"}),
        ("stream_triad", {"n": 4096, "framework": "jax", "dtype": "fp32"}),
        ("attention", {"batch": 1, "heads": 2, "seq": 32, "head_dim": 16, "causal": True}),
        ("attention", {"batch": 1, "heads": 2, "seq": 32, "head_dim": 16, "backend": "unfused", "causal": True}),
        ("attention", {"batch": 1, "heads": 2, "seq": 32, "head_dim": 16, "backend": "math", "dtype": "bf16"}),
        ("layernorm", {"rows": 16, "cols": 32}),
        ("layernorm", {"rows": 16, "cols": 32, "impl": "unfused", "dtype": "bf16"}),
        ("softmax", {"rows": 16, "cols": 32, "impl": "unfused"}),
        ("softmax", {"rows": 16, "cols": 32, "framework": "jax"}),
        ("gelu", {"n": 1000}),
        ("gelu", {"n": 1000, "impl": "unfused", "approximate": "tanh"}),
        ("adamw", {"n_params": 1000, "n_tensors": 3, "impl": "plain"}),
        ("adamw", {"n_params": 1000, "n_tensors": 3, "impl": "foreach"}),
        ("adamw", {"n_params": 1000, "n_tensors": 3, "impl": "fused"}),
    ],
)
def test_kernels_pass_their_checks(kernel, raw):
    res = R.run(kernel, raw, record=False, **FAST)
    assert res.ok and res.median_s > 0 and res.n >= 1
    assert res.measurement.metadata["check_error"] <= R.get(kernel).build(
        R.validate_params(kernel, raw), "cpu").tolerance


def test_adamw_reference_catches_a_wrong_learning_rate():
    from kernels.optim import adamw_reference

    p0, g = np.ones(4), np.array([1.0, -2.0, 3.0, -4.0])
    step = adamw_reference(p0, g, lr=0.1, wd=0.0) - p0
    # first Adam step moves every parameter by -lr * sign(g) (m_hat / sqrt(v_hat) = g / |g|)
    np.testing.assert_allclose(step, -0.1 * np.sign(g), rtol=1e-6)


def test_jax_and_torch_gemm_agree():
    g = R.get("gemm")
    outs = {}
    for fw in ("torch", "jax"):
        p = R.validate_params("gemm", {"m": 64, "n": 48, "k": 80, "framework": fw}, device="cpu")
        s = g.build(p, "cpu")
        outs[fw] = np.asarray(s.fn(*s.inputs[0]), dtype=np.float64)
    np.testing.assert_allclose(outs["torch"], outs["jax"], rtol=1e-4, atol=1e-4)
    res = R.run("gemm", {"m": 64, "n": 48, "k": 80, "framework": "jax"}, record=False, **FAST)
    assert res.ok and res.measurement.sync == "jax"


# ---------------------------------------------------------------------------------
# faults: oom, skipped, sweeps go on
# ---------------------------------------------------------------------------------
def test_oom_is_recorded_and_the_sweep_goes_on(store_path):
    rs = R.sweep("stream_triad", [{"n": 1000}, {"n": "64G"}, {"n": 2000}], **FAST)
    assert [r.status for r in rs] == ["ok", "oom", "ok"]
    assert "GiB" in rs[1].error and rs[1].median_s is None
    df = Store(store_path).records()
    assert sorted(df["status"]) == ["ok", "ok", "oom"]
    assert set(df["kind"]) == {"kernel"}


def test_allocator_oom_becomes_oom_result():
    base = R.get("stream_copy")

    def build(p, device):
        raise MemoryError("simulated allocator failure")

    R.register(dataclasses.replace(base, name="oom_copy", build=build, module="tests"))
    try:
        res = R.run("oom_copy", {"n": 10}, record=False, **FAST)
        assert res.status == "oom" and "simulated" in res.error
    finally:
        R.unregister("oom_copy")


def test_unsupported_entries_are_skipped_with_reason(store_path):
    rs = R.sweep("gemm", [{"m": 16, "n": 16, "k": 16}, {"dtype": "tf32", "m": 16, "n": 16, "k": 16}], **FAST)
    assert [r.status for r in rs] == ["ok", "skipped"]
    assert "TF32" in rs[1].error
    assert sorted(Store(store_path).records()["status"]) == ["ok", "skipped"]


def test_sweep_type_checks_everything_before_running(store_path):
    with pytest.raises(InputError, match="gemm.m"):
        R.sweep("gemm", [{"m": 16}, {"m": "x"}], **FAST)
    assert len(Store(store_path).records()) == 0


# ---------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------
def test_working_set_sweep_spans_l1_to_8x_llc():
    from kernels.stream import OPS, sweep_params, working_set_sweep

    caches = {"L1d": 32 * 2**10, "L2": 2**20, "L3": 32 * 2**20}
    pts = working_set_sweep("triad", caches=caches)
    ws = [p["working_set_bytes"] for p in pts]
    assert ws == sorted(ws) and len(set(ws)) == len(ws)
    assert ws[0] <= caches["L1d"] and ws[-1] >= 8 * caches["L3"]
    assert all(p["working_set_bytes"] == OPS["triad"][0] * p["n"] * 8 for p in pts)
    assert "working_set_bytes" not in sweep_params(pts)[0]
    R.validate_params("stream_triad", sweep_params(pts)[0])


def test_gemm_shape_sweeps():
    from kernels.gemm import shape_sweep, transformer_shapes

    sq = shape_sweep("square", sizes=(64, 128), dtype="bf16")
    assert sq == [{"m": 64, "n": 64, "k": 64, "dtype": "bf16"}, {"m": 128, "n": 128, "k": 128, "dtype": "bf16"}]
    tr = {s["name"]: s for s in transformer_shapes(hidden=1024, tokens=2048)}
    assert tr["qkv_proj"] == {"name": "qkv_proj", "m": 2048, "n": 3072, "k": 1024}
    assert tr["mlp_down"]["k"] == 4096
    for p in shape_sweep("transformer", hidden=64, tokens=32):
        R.validate_params("gemm", p)
    with pytest.raises(InputError, match="valid choices"):
        shape_sweep("cubic")


def test_gemm_max_reports_the_best_searched_shape(store_path):
    res = R.run("gemm_max", {"min_dim": 32, "max_dim": 96, "step": 32, "search_ms": 2, "refine": False},
                **FAST)
    assert res.ok and res.kernel == "gemm_max"
    m, n, k = res.extra["best_m"], res.extra["best_n"], res.extra["best_k"]
    assert (m, n, k) in {(32, 32, 32), (64, 64, 64), (96, 96, 96)}
    assert res.flops == 2.0 * m * n * k and res.params["m"] == m
    assert res.extra["candidates"] == 4  # 3 searched + the re-measure
    assert Store(store_path).records()["name"].tolist() == ["gemm_max"]
    with pytest.raises(InputError, match="min_dim"):
        R.validate_params("gemm_max", {"min_dim": 512, "max_dim": 256})


def test_module_with_missing_dependency_is_skipped(monkeypatch):
    import pkgutil

    real = pkgutil.iter_modules

    def fake(path=None, prefix=""):
        yield from real(path, prefix)
        yield pkgutil.ModuleInfo(None, "zz_needs_missing_dep", False)

    monkeypatch.setattr(R.spec, "_DISCOVERED", False)
    monkeypatch.setattr(R.spec, "SKIPPED_MODULES", {})
    monkeypatch.setattr(R.spec.pkgutil, "iter_modules", fake)
    with pytest.warns(R.KernelModuleSkipped, match="zz_needs_missing_dep"):
        R.discover()
    assert "kernels.zz_needs_missing_dep" in R.spec.SKIPPED_MODULES
    assert R.get("gemm").name == "gemm"


# ---------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------
REQUIRED_JSON = ("kernel", "params", "median_s", "iqr_s", "n", "flops", "bytes", "flops_per_s", "bytes_per_s",
                 "intensity", "noise_warning", "node_id")


def test_cli_json_has_required_keys_and_is_stored(cli, store_path):
    proc = cli("bench", "gemm", "--set", "m=32", "--set", "n=32", "--set", "k=16", "--json", "--measure-ms", "5")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert set(REQUIRED_JSON) <= set(d)
    assert d["params"]["m"] == 32 and d["flops"] == 2 * 32 * 32 * 16 and d["status"] == "ok"
    df = Store(store_path).records()
    assert list(df["name"]) == ["gemm"] and json.loads(df["metrics"][0])["flops"] == d["flops"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("bench", "nope"), "no kernel named 'nope'; valid choices:"),
        (("bench", "gemm", "--set", "mm=3"), "unknown parameter 'mm'"),
        (("bench", "gemm", "--set", "m=x"), "gemm.m: expected a positive integer"),
        (("bench", "gemm", "--set", "dtype=tf32"), "valid choices here"),
        (("bench", "gemm", "--set", "m"), "expected key=value"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(cli, store_path, args, needle):
    proc = cli(*args)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(store_path.glob("*.parquet"))


def test_cli_list_and_oom_exit(cli, store_path):
    proc = cli("bench", "--list")
    assert proc.returncode == 0
    for name in REQUIRED:
        assert f"\n{name}  (" in "\n" + proc.stdout
    proc = cli("bench", "stream_copy", "--set", "n=64G", "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["status"] == "oom"
    assert list(Store(store_path).records()["status"]) == ["oom"]


def test_noise_warning_is_a_bool_and_nan_free_json():
    res = R.run("stream_copy", {"n": 512}, record=False, **FAST)
    d = res.to_json()
    assert isinstance(d["noise_warning"], bool)
    assert all(not (isinstance(v, float) and math.isnan(v)) for v in d.values())


def test_h2d_copy_is_skipped_with_reason_in_a_sweep(store_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    (r,) = R.sweep("h2d_copy", [{"size_bytes": "1MiB", "pinned": "false"}])
    assert r.status == "skipped" and "needs a CUDA device" in r.error
    assert list(Store(store_path).records()["status"]) == ["skipped"]
