"""The predictor's local closed loop (benchmarks/predictor_closed_loop.py) on two tiny configs.

Machinery only: kernels run into a temporary store, the calibration reads them back as source (a),
two tiny transformer_lm configs are measured (CPU time per step, profiled) and predicted. No tight
timing assertion: the machine is shared and noisy; the prediction must be finite, positive, carry
the breakdown, and be within a loose factor of the measured step.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cl():
    spec = importlib.util.spec_from_file_location("predictor_closed_loop", ROOT / "benchmarks" /
                                                  "predictor_closed_loop.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["predictor_closed_loop"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_closed_loop_on_two_tiny_configs(cl, tmp_path):
    import torch

    from hwcore.store import Store

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        store = Store(tmp_path / "store")
        kernels = cl.run_kernels(store, quick=True, measure_ms=40.0)
        assert all(k["status"] == "ok" for k in kernels)
        points = cl.kernel_points(store)
        assert {p.kernel for p in points} >= {"gemm", "stream_copy", "attention", "launch", "layernorm", "dispatch"}
        cals = cl.calibrations(points)
        assert list(cals) == ["stream", "elementwise", "dispatch"]
        kinds = cals["dispatch"].source_kinds()
        for rate in ("matmul_efficiency.fp32", "memory_bandwidth", "attention_efficiency", "launch_overhead",
                     "host_dispatch_per_op"):
            assert kinds[rate] == "measured", rate  # calibrated from this run's kernels only
        rows = cl.closed_loop(cl.QUICK_CONFIGS, cals, threads=1, timed_steps=3, profile=True)
    finally:
        torch.set_num_threads(threads)
    assert len(rows) == 2
    for r in rows:
        assert r.timed_steps == 3 and r.measured_s > 0 and r.measured_wall_s > 0
        for v in cals:
            pred = r.predictions[v]
            assert math.isfinite(pred["step_time_s"]) and pred["step_time_s"] > 0
            assert set(pred["breakdown_s"]) >= {"compute", "memory_bound", "exposed_comm", "overhead"}
            assert 0.2 < pred["step_time_s"] / r.measured_s < 5.0, (r.config.name, v, pred, r.measured_s)
        assert set(r.measured_classes_s) == {"gemm", "attention", "memory_bound", "optimizer", "communication",
                                             "other"}
        assert r.measured_classes_s["gemm"] > 0 and sum(r.measured_buckets().values()) > 0
    # the checkpointed config recomputes the forward: predicted slower than the plain one
    assert rows[1].predicted("stream") > rows[0].predicted("stream")
    # the measured host cost adds to the step: the dispatch variant predicts more time than the one without
    for r in rows:
        assert r.predictions["dispatch"]["breakdown_s"]["overhead"] > r.predictions["elementwise"]["breakdown_s"]["overhead"]
    s = cl.summary(rows, "dispatch")
    assert s["n"] == 2 and s["worst_abs_error"] >= s["median_abs_error"] >= 0


def test_gpu_plan_path_on_this_cpu(cl, tmp_path):
    """``--gpu-smoke``: the GPU plan (bf16 kernels, bf16-autocast configs without per-phase syncs, the wall clock,
    a named node) end to end at tiny sizes; the JSON carries the calibration points and the failed configs."""
    import json

    out = tmp_path / "gpu.json"
    assert cl.main(["--gpu-smoke", "--node", "cpu-epyc-zen4-2c", "--timed-steps", "2", "--measure-ms", "10",
                    "--no-profile", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["meta"]["plan"] == "gpu-smoke" and d["meta"]["clock"] == "wall" and d["meta"]["node"] == "cpu-epyc-zen4-2c"
    assert {k["params"].get("dtype") for k in d["kernels"] if k["kernel"] in ("gemm", "attention")} == {"bf16"}
    assert {p["kernel"] for p in d["points"]} >= {"gemm", "attention", "launch", "dispatch"}  # tiny copies: cache
    assert len(d["rows"]) + len(d["failed"]) == len(cl.GPU_SMOKE_CONFIGS)
    for r in d["rows"]:
        assert math.isfinite(r["predictions"]["dispatch"]["step_time_s"]) and r["measured_step_s"] > 0
    assert [c.name for c in cl.GPU_CONFIGS][0] == "lm w512 L4 s512 b16" and len(cl.GPU_CONFIGS) >= 8


def test_gpu_without_cuda_and_unknown_device_are_refused(cl, capsys):
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as e:
            cl.main(["--device", "cuda", "--quick"])
        assert e.value.code == 2 and "no CUDA device here" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cl.main(["--device", "tpu"])
    assert e.value.code == 2 and "expected cpu or cuda" in capsys.readouterr().err


def test_the_held_out_h200_run_is_what_the_current_predictor_scores(cl):
    """The H200 hold-out run (GPU_HOLDOUT_CONFIGS, measured after the GPU step terms were committed) replayed with
    the predictor as it is now gives back its recorded errors: the hold-out figures in benchmarks/README are this
    code's. A step-model change that moves them makes these configs development data: record the new figures as
    such (and measure a fresh hold-out set) rather than updating them as held-out."""
    rec = ROOT / "data" / "reference" / "device" / "h200-sxm_2026-12-04_holdout_closed_loop.json"
    out = cl.replay(rec)
    assert out["meta"]["plan"] == "gpu-holdout" and len(out["rows"]) == len(cl.GPU_HOLDOUT_CONFIGS) == 12
    for r in out["rows"]:
        assert r["errors"]["dispatch"] == pytest.approx(r["recorded_errors"]["dispatch"], abs=1e-9), r["config"]
    assert not {c.name for c in cl.GPU_HOLDOUT_CONFIGS} & {c.name for c in cl.GPU_CONFIGS}
    # the run's in-process profile (classification fixed before it) accounts for the device's busy time
    import json

    rows = json.loads(rec.read_text())["rows"]
    for r in rows:
        busy = sum(r["measured_classes_s"].values())
        assert 0 < busy <= r["measured_profiled_step_s"] * 1.02 and r["measured_classes_s"]["other"] < 0.05 * busy


def test_replay_of_the_recorded_h200_run(cl, capsys, tmp_path):
    """The committed H200 closed loop re-predicted from its own calibration points, no device needed: every
    recorded row comes back with each calibration variant's error; a missing file is refused with exit 2."""
    rec = ROOT / "data" / "reference" / "device" / "h200-sxm_2026-12-04_closed_loop.json"
    out = cl.replay(rec)
    assert out["meta"]["node"] == "h200-sxm" and len(out["rows"]) == 11
    assert set(out["summary"]) == {"stream", "elementwise", "dispatch"}
    for r in out["rows"]:
        assert set(r["errors"]) == set(r["recorded_errors"]) and all(math.isfinite(e) for e in r["errors"].values())
        assert r["breakdown_s"]["dispatch"]["compute"] > 0
    assert cl.main(["--replay", str(rec), "--json", str(tmp_path / "r.json")]) == 0
    assert "(dispatch) median |error|" in capsys.readouterr().out and (tmp_path / "r.json").exists()
    with pytest.raises(SystemExit) as e:
        cl.main(["--replay", str(tmp_path / "missing.json")])
    assert e.value.code == 2


def test_gemm_duty_check_runs_its_path_and_refuses_without_a_gpu(tmp_path, capsys):
    """benchmarks/gemm_duty.py (the GPU closed loop's GEMM-clock check): the smoke path times both modes and writes
    its JSON; asked for a GPU on a machine without one, it says so and exits 2."""
    import json

    import torch

    spec = importlib.util.spec_from_file_location("gemm_duty", ROOT / "benchmarks" / "gemm_duty.py")
    gd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gd)
    out = tmp_path / "d.json"
    assert gd.main(["--smoke", "--rounds", "1", "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert {r["mode"] for r in d["rows"]} == {"sustained", "interleaved"} and d["ratio"] > 0
    assert all(r["gemms"] > 0 and r["median_s"] > 0 for r in d["rows"])
    if not torch.cuda.is_available():
        assert gd.main([]) == 2 and "no CUDA device" in capsys.readouterr().err
