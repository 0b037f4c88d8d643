"""The fused Triton softmax: correctness in Triton's CPU interpreter, accounting, registry entry.

Triton's interpreter replaces ``tl.*`` when triton is *imported* with
``TRITON_INTERPRET=1``; other tests in this process may already have imported
triton normally, so the interpreter checks run in a subprocess.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(
    not HAS_TRITON, reason="triton is not installed (pip install triton; it is in the 'test' extra)"
)

ts = pytest.importorskip("kernels.triton_softmax")


def run_interpreted(code: str, tmp_path, timeout: float = 240) -> dict:
    """Run ``code`` (which prints one JSON line last) with TRITON_INTERPRET=1 in a fresh process."""
    script = tmp_path / "interp_case.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                          cwd=str(REPO), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------
# accounting (no triton needed)
# ---------------------------------------------------------------------------------
def test_flops_and_bytes_hand_computed():
    # 3 x 5 elements: 5 FLOP each (max, sub, exp, sum, div) -> 75; bf16 read+write 2*15*2 = 60 B
    assert ts.softmax_flops(3, 5) == 75
    assert ts.softmax_bytes(3, 5, 2) == 60
    from kernels import registry as R

    k = R.get("triton_softmax")
    p = R.validate_params("triton_softmax", {"rows": "4096", "cols": "1000", "dtype": "fp32"})
    assert k.flops(p) == 5 * 4096 * 1000
    assert k.bytes(p) == 2 * 4096 * 1000 * 4
    assert k.flops(p) / k.bytes(p) == pytest.approx(5 / 8)


def test_registry_validation_messages():
    from hwcore.errors import InputError
    from kernels import registry as R

    with pytest.raises(InputError, match=r"triton_softmax.impl.*cublas.*valid choices: torch, triton"):
        R.validate_params("triton_softmax", {"impl": "cublas"})
    with pytest.raises(InputError, match="triton_softmax.dtype"):
        R.validate_params("triton_softmax", {"dtype": "fp64"})
    with pytest.raises(InputError, match=r"triton_softmax.cols: must be <= 65536"):
        R.validate_params("triton_softmax", {"cols": 70000})
    # torch handles any width
    assert R.validate_params("triton_softmax", {"cols": 70000, "impl": "torch"})["cols"] == 70000


@needs_triton
def test_triton_on_cpu_without_interpreter_is_unsupported():
    from kernels import registry as R

    if ts.interpreter_active():
        pytest.skip("this process imported triton in interpreter mode")
    with pytest.raises(R.Unsupported, match=r"impl='triton' cannot run on cpu.*TRITON_INTERPRET=1.*valid choices here: torch"):
        R.run("triton_softmax", {"rows": 4, "cols": 8}, record=False)


def test_torch_impl_matches_reference_and_check_catches_error():
    for dtype in ts.DTYPES:
        x = ts.make_input(5, 37, dtype)
        assert ts.check(ts.softmax_torch(x), x, dtype) < 1e-2
    x = ts.make_input(5, 37, "fp32")
    wrong = ts.softmax_torch(x) * 1.001
    with pytest.raises(AssertionError, match="softmax mismatch"):
        ts.check(wrong, x, "fp32")
    assert not bool((ts.make_input(4, 4, "bf16") == 0).all())  # fresh random inputs, never zeros


@pytest.mark.filterwarnings("ignore::hwcore.timing.NoisyMeasurementWarning")
def test_torch_impl_through_registry_records(store_path):
    from hwcore.store import Store
    from kernels import registry as R

    r = R.run("triton_softmax", {"rows": 32, "cols": 100, "impl": "torch", "dtype": "fp32", "flush": "off"},
              warmup_ms=1, measure_ms=5)
    assert r.ok and r.flops == 5 * 32 * 100 and r.bytes == 2 * 32 * 100 * 4
    assert r.measurement.metadata["impl"] == "torch.softmax(out=)"
    from hwcore.store import decode

    df = decode(Store(store_path).records(name="triton_softmax"))
    assert len(df) == 1 and df.iloc[0]["status"] == "ok"
    assert df.iloc[0]["params"]["impl"] == "torch"


# ---------------------------------------------------------------------------------
# the Triton kernel itself, in the interpreter
# ---------------------------------------------------------------------------------
@needs_triton
def test_interpreter_self_check(tmp_path):
    out = run_interpreted(
        """
        import json
        from kernels import triton_softmax as ts
        print(json.dumps({"describe": ts.describe(), "self_check": ts.self_check("cpu")}))
        """,
        tmp_path,
    )
    assert out["describe"]["interpreter"] is True
    sc = out["self_check"]
    assert sc["ok"] is True
    cases = sc["cases"]
    tri = [c for c in cases if c["impl"] == "triton"]
    # every dtype x shape, plus the large-logits and strided cases
    assert len(tri) == len(ts.DTYPES) * 5 + 2
    by = {(c["dtype"], tuple(c["shape"])): c["max_abs_err"] for c in tri if "case" not in c}
    assert by[("fp32", (2, 129))] < 1e-6  # 129 -> block 256: masking of 127 padded lanes
    assert by[("bf16", (3, 1000))] < 8e-3
    assert by[("fp32", (3, 1))] == 0.0  # a single column is exactly 1
    big = next(c for c in cases if c.get("case") == "large_logits")
    assert big["max_abs_err"] < 1e-6
    assert sc["max_row_sum_err"] < 1e-6


@needs_triton
def test_registry_runs_kernel_in_interpreter_and_catches_wrong_kernel(tmp_path):
    """The registry's pre-timing check passes the real kernel and fails an unmasked one."""
    out = run_interpreted(
        """
        import json
        import triton
        import triton.language as tl
        from kernels import registry as R
        from kernels import triton_softmax as ts

        good = R.run("triton_softmax", {"rows": 8, "cols": 100, "dtype": "bf16"}, record=False,
                     warmup_ms=0, measure_ms=1)

        @triton.jit
        def unmasked(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK_SIZE: tl.constexpr):
            # BUG on purpose: padded lanes load 0 instead of -inf, so exp(0 - max) leaks into the sum
            row = tl.program_id(0)
            offs = tl.arange(0, BLOCK_SIZE)
            mask = offs < n_cols
            x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=0.0).to(tl.float32)
            x = x - tl.max(x, axis=0)
            num = tl.exp(x)
            y = num / tl.sum(num, axis=0)
            tl.store(out_ptr + row * out_stride + offs, y.to(out_ptr.dtype.element_ty), mask=mask)

        ts._softmax_kernel = unmasked
        try:
            R.run("triton_softmax", {"rows": 8, "cols": 100, "dtype": "fp32"}, record=False)
            caught = None
        except R.KernelCheckError as exc:
            caught = str(exc)
        print(json.dumps({"good_status": good.status, "good_err": good.measurement.metadata["check_error"],
                          "interp": good.measurement.metadata["interpreter"], "caught": caught}))
        """,
        tmp_path,
    )
    assert out["good_status"] == "ok" and out["interp"] is True
    assert out["good_err"] < 1e-2
    assert out["caught"] and "not timing a wrong kernel" in out["caught"]


def test_cli_bench_impl_torch_and_clear_error_for_triton_on_cpu(cli):
    r = cli("bench", "triton_softmax", "--set", "impl=torch", "--set", "rows=16", "--set", "cols=100", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["kernel"] == "triton_softmax" and d["params"]["impl"] == "torch"
    assert d["flops"] == 5 * 16 * 100 and d["bytes"] == 2 * 16 * 100 * 2  # bf16 default
    if HAS_TRITON:
        r = cli("bench", "triton_softmax", "--set", "rows=4", env={"TRITON_INTERPRET": ""})
        assert r.returncode == 2 and "valid choices here: torch" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
