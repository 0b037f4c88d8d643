"""The GPU path, checked on CPU where it can be: CUDA-event timing against a fake
``torch.cuda``, the device check's table/datasheet logic, and the device check
driven end to end in its ``--cpu-smoke`` mode. Tests marked ``gpu`` run only
where CUDA is present."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest

from conftest import REPO

torch = pytest.importorskip("torch")

sys.path.insert(0, str(REPO / "benchmarks"))
import device_check as dc  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


# ---------------------------------------------------------------------------------
# CUDA-event timing against a fake torch.cuda
# ---------------------------------------------------------------------------------
class FakeCuda:
    """Events stamp a synthetic GPU clock that each kernel 'launch' advances."""

    def __init__(self):
        self.gpu_ms = 0.0
        self.syncs: list[object] = []
        self.streams: list[object] = []
        self.recorded_on: set[str] = set()
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self, stream=None):
                fake.recorded_on.add(str(stream))
                self.t = fake.gpu_ms

            def elapsed_time(self, other):
                return other.t - self.t

        self.Event = Event

    def current_stream(self, device=None):
        self.streams.append(device)
        return f"stream<{device}>"

    def synchronize(self, device=None):
        self.syncs.append(device)


@pytest.fixture
def fake_cuda(monkeypatch):
    f = FakeCuda()
    monkeypatch.setattr(torch.cuda, "Event", f.Event)
    monkeypatch.setattr(torch.cuda, "current_stream", f.current_stream)
    monkeypatch.setattr(torch.cuda, "synchronize", f.synchronize)
    return f


def test_cuda_events_time_on_the_benchmarked_devices_stream(fake_cuda):
    from hwcore.timing import benchmark

    def kernel():
        fake_cuda.gpu_ms += 2.0  # each launch costs 2 ms of GPU time

    m = benchmark(kernel, device="cuda:1", sync="cuda", warmup_ms=0, measure_ms=10, min_reps=5, max_reps=8,
                  warn=False)
    assert m.clock == "cuda_event" and m.inner == 1
    assert m.median_s == pytest.approx(2e-3) and m.n >= 5
    assert fake_cuda.recorded_on == {"stream<cuda:1>"}
    # every synchronize waited on cuda:1, not on the current device
    assert fake_cuda.syncs and all(str(d) == "cuda:1" for d in fake_cuda.syncs)


def test_events_with_sync_none_still_wait_in_warmup(fake_cuda):
    """With sync='none' the warm-up must still wait for the GPU, or the per-call
    estimate (which sizes the number of reps) is only the launch overhead."""
    from hwcore.timing import benchmark

    def kernel():
        fake_cuda.gpu_ms += 1.0

    m = benchmark(kernel, device="cuda", sync="none", warmup_ms=0, min_warmup=3, measure_ms=5, min_reps=3,
                  max_reps=4, warn=False)
    assert len(fake_cuda.syncs) >= 3 + 1  # one per warm-up call + the final one
    assert m.median_s == pytest.approx(1e-3)


def test_flusher_runs_outside_the_timed_events(fake_cuda):
    from hwcore.timing import benchmark

    calls = {"flush": 0}

    def flush():
        calls["flush"] += 1
        fake_cuda.gpu_ms += 50.0  # a slow flush must not show in the kernel's time

    def kernel():
        fake_cuda.gpu_ms += 3.0

    m = benchmark(kernel, device="cuda", sync="cuda", flusher=flush, warmup_ms=0, measure_ms=10, min_reps=4,
                  max_reps=4, warn=False)
    assert m.flush and calls["flush"] >= m.n
    assert m.median_s == pytest.approx(3e-3)


def test_cpu_path_untouched_by_cuda_changes(fake_cuda):
    from hwcore.timing import benchmark

    m = benchmark(lambda: None, warmup_ms=0, measure_ms=2, min_reps=3, warn=False)
    assert m.clock != "cuda_event" and fake_cuda.syncs == []


# ---------------------------------------------------------------------------------
# the device check's pure parts
# ---------------------------------------------------------------------------------
def test_attention_flops_hand_computed():
    # b=1, h=2, s=4, d=8: 4 * 1 * 2 * 16 * 8 = 1024; causal halves it
    assert dc.attention_flops(1, 2, 4, 8, False) == 1024
    assert dc.attention_flops(1, 2, 4, 8, True) == 512


def test_fmt_scales_units():
    assert dc._fmt(7.9e14, "FLOP/s") == "790.0 TFLOP/s"
    assert dc._fmt(4.3e12, "B/s") == "4.3 TB/s"
    assert dc._fmt(2.5e9, "B/s") == "2.5 GB/s"
    assert dc._fmt(None, "B/s") == "n/a"


def _fake_node():
    peaks = {"bf16": None, "fp16": None, "fp8": None}
    return types.SimpleNamespace(
        peaks=peaks,
        memory_bandwidth_bytes_per_s=4.8e12,
        peak_flops_per_s=lambda dt, per="node": {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12}[dt] * (
            1 if per == "accelerator" else 8),
    )


def test_datasheet_lookup_and_table():
    node = _fake_node()
    assert dc.datasheet(node, "gemm_fp8") == (1978.9e12, "dense fp8 FLOP/s")
    assert dc.datasheet(node, "copy_d2d") == (4.8e12, "HBM B/s")
    assert dc.datasheet(None, "gemm_bf16") == (None, "")
    assert dc.datasheet(types.SimpleNamespace(peaks={}), "gemm_bf16") == (None, "")
    # the real catalog entry: one H200's dense bf16, not the 8-GPU node's (the first GPU run printed 7915 TFLOP/s)
    from hwmodels.catalog import default_catalog

    v, _ = dc.datasheet(default_catalog().get("h200-sxm"), "gemm_bf16")
    assert v == pytest.approx(989.4e12, rel=0.01)
    rows = [
        {"step": "gemm_bf16", "status": "ok", "achieved": 7.9e14, "unit": "FLOP/s"},
        {"step": "copy_d2d", "status": "ok", "achieved": 4.3e12, "unit": "B/s", "throttle": True},
        {"step": "gemm_fp8", "status": "skipped", "error": "fp8 needs capability >= 8.9"},
        {"step": "triton", "status": "ok", "achieved": 3.0e12, "unit": "B/s", "summary": {"triton_over_torch": 1.1}},
    ]
    out = dc.table(rows, node)
    lines = out.splitlines()
    assert "achieved" in lines[0] and "datasheet" in lines[0]
    bf16 = next(ln for ln in lines if ln.startswith("gemm_bf16"))
    assert "790.0 TFLOP/s" in bf16 and "989.4 TFLOP/s" in bf16 and "0.80" in bf16
    copy = next(ln for ln in lines if ln.startswith("copy_d2d"))
    assert "0.90" in copy and "THROTTLED" in copy
    assert "fp8 needs capability" in next(ln for ln in lines if ln.startswith("gemm_fp8"))
    assert "triton/torch = 1.10" in next(ln for ln in lines if ln.startswith("triton"))


def test_nvml_index_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert dc._nvml_index() == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert dc._nvml_index() == 0
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert dc._nvml_index() == 0


def test_gpu_plan_fits_eight_minutes():
    total = sum(v["budget_s"] for v in dc.GPU_PLAN.values())
    assert total <= 420  # + installs and imports in device_check.sh: under 480 s on one H200
    assert set(dc.GPU_PLAN) == set(dc.SMOKE_PLAN) == set(dc.STEPS)


def test_unknown_step_is_rejected(tmp_path, capsys):
    assert dc.main(["--steps", "gemm_bf16,nope", "--out", str(tmp_path)]) == 2
    assert "unknown step 'nope'; valid choices: env" in capsys.readouterr().err


def test_shell_script_parses():
    subprocess.run(["bash", "-n", str(REPO / "benchmarks" / "device_check.sh")], check=True)


# ---------------------------------------------------------------------------------
# end to end on CPU
# ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_device_check_cpu_smoke_end_to_end(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable)
    env.pop("HWEVAL_STORE", None)
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "device_check.sh"), "--cpu-smoke",
                           "--steps", "env,gemm_bf16,gemm_fp8,copy_d2d,attention,triton,transformer_lm"],
                          capture_output=True, text=True, env=env, timeout=170, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((out / "device_check.json").read_text())
    rows = {r["step"]: r for r in report["rows"]}
    assert report["smoke"] is True and report["device"] == "cpu"
    for step in ("env", "gemm_bf16", "copy_d2d", "attention"):
        assert rows[step]["status"] == "ok", rows[step]
    assert rows["gemm_bf16"]["achieved"] > 0 and rows["gemm_bf16"]["unit"] == "FLOP/s"
    assert rows["copy_d2d"]["achieved"] > 0 and rows["copy_d2d"]["unit"] == "B/s"
    assert rows["gemm_fp8"]["status"] == "skipped" and "fp8" in rows["gemm_fp8"]["error"]
    assert rows["attention"]["summary"]["causal=True"]["check_error"] < 1e-4
    if importlib.util.find_spec("triton") is not None:
        assert rows["triton"]["status"] == "ok", rows["triton"]
        assert rows["triton"]["summary"]["triton"]["check_error"] < 1e-2
    assert rows["transformer_lm"]["status"] in ("ok", "failed")  # owned by the workloads issue
    # no NVML here: telemetry is a clean no-op
    assert rows["gemm_bf16"]["telemetry"]["gpu_telemetry"] is False
    assert (out / "fingerprint.json").exists() and json.loads((out / "fingerprint.json").read_text())["node_id"]
    # the table is printed last
    tail = proc.stdout.strip().splitlines()
    assert any(ln.startswith("step") and "datasheet" in ln for ln in tail[-12:])
    assert tail[-1].startswith("device_check.sh: done")
    # results are in the store under $OUT
    from hwcore.store import Store

    df = Store(out / "store").records()
    names = set(df["name"])
    assert {"gemm_max", "stream_copy", "triton_softmax", "device_check.sdpa", "device_check.gemm_bf16"} <= names
    assert set(df[df["name"] == "gemm_max"]["status"]) == {"ok", "skipped"}


# ---------------------------------------------------------------------------------
# only on a GPU
# ---------------------------------------------------------------------------------
@pytest.mark.gpu
@gpu
def test_triton_softmax_on_cuda_matches_torch():
    from kernels import registry as R

    for impl in ("triton", "torch"):
        r = R.run("triton_softmax", {"rows": 256, "cols": 1000, "dtype": "bf16", "impl": impl}, device="cuda",
                  record=False, measure_ms=20)
        assert r.ok and r.measurement.clock == "cuda_event"


@pytest.mark.gpu
@gpu
def test_real_nvml_snapshot():
    from hwcore.telemetry import snapshot

    res = snapshot(0)
    if importlib.util.find_spec("pynvml") is None:
        assert not res.available
    else:
        assert res.available and res.devices[0].max_sm_clock_hz
