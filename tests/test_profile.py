"""workloads.profile: torch.profiler capture of steady-state steps and the per-op-class breakdown."""

from __future__ import annotations

import json

import pytest

from workloads.profile import CLASSES, STEP_RANGE, op_class, trace_summary

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name, cls", [
    ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::linear", "gemm"),
    ("autograd::engine::evaluate_function: MmBackward0", "gemm"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", "attention"),
    ("aten::_efficient_attention_backward", "attention"),
    ("aten::native_layer_norm", "memory_bound"), ("aten::gelu_backward", "memory_bound"),
    ("aten::embedding_dense_backward", "memory_bound"), ("aten::broadcast_tensors", "memory_bound"),
    ("Optimizer.step#AdamW.step", "optimizer"), ("aten::_foreach_addcdiv_", "optimizer"),
    ("c10d::allreduce_", "communication"), ("nccl:all_reduce", "communication"),
    (STEP_RANGE, None), ("some python range", None),
])
def test_op_class_by_name(name, cls):
    assert op_class(name) == cls


def test_profiled_run_breakdown_sums_to_the_profiled_step(tmp_path):
    from workloads import runner

    res = runner.run("transformer_lm", {"preset": "tiny", "eval_every": 1000, "eval_batches": 1,
                                        "stop_at_target": False, "threads": 1},
                     max_steps=8, record=False, profile_dir=tmp_path)
    assert res.status == "ok", res.error
    # the trace is Chrome/Perfetto JSON with the three recorded step ranges
    assert res.profile_trace and res.profile_trace.startswith(str(tmp_path))
    summ = trace_summary(res.profile_trace)
    assert summ["events"] > 100 and summ["step_ranges"] == 3
    bd = res.profile_breakdown_s
    assert set(bd) == set(CLASSES) and all(v >= 0 for v in bd.values())
    prof = res.profile
    assert prof["steps"] == 3 and prof["time_kind"] == "self_cpu"
    # self times of the events inside the step ranges add up to the ranges' duration (one thread on CPU)
    assert sum(bd.values()) == pytest.approx(prof["step_s"], rel=0.25)
    assert bd["gemm"] > 0 and bd["attention"] > 0 and bd["optimizer"] > 0 and bd["memory_bound"] > 0
    assert bd["communication"] == 0
    assert sum(prof["fraction_of_step"].values()) == pytest.approx(1.0, rel=0.25)
    # profiled steps (1 profiler warm-up + 3 active) are left out of the step statistics
    assert res.step_time_s["n"] == 8 - runner.WARMUP_STEPS - 4
    assert any("torch.profiler" in n for n in res.breakdown_notes)
    json.dumps(res.to_json())  # storable


def test_profile_refuses_jax_and_multi_process(tmp_path):
    from hwcore.errors import InputError
    from workloads import runner

    with pytest.raises(InputError, match="nprocs"):
        runner.run("mlp_regressor", {"preset": "tiny", "nprocs": 2}, max_steps=4, record=False,
                   profile_dir=tmp_path)


def test_train_cli_profile_stores_trace_beside_the_results(cli, tmp_path):
    from hwcore.records import WorkloadRecord, read
    from hwcore.store import Store

    store = tmp_path / "store"
    p = cli("train", "mlp_regressor", "--set", "preset=tiny", "--set", "eval_every=1000", "--set", "threads=1",
            "--max-steps", "8", "--profile", "--store", str(store))
    assert p.returncode == 0, p.stderr
    assert "op classes over 3 profiled step(s)" in p.stdout and "gemm" in p.stdout
    (rec,) = read(Store(store), WorkloadRecord)
    trace = rec.metrics["profile_trace"]
    assert trace.startswith(str(store / "profiles")) and trace_summary(trace)["step_ranges"] == 3
    assert set(rec.metrics["profile_breakdown_s"]) == set(CLASSES) and rec.metrics["profile_breakdown_s"]["gemm"] > 0
    bad = cli("train", "mlp_regressor", "--set", "preset=tiny", "--profile-dir", str(tmp_path), "--no-record")
    assert bad.returncode == 2 and "--profile-dir needs --profile" in bad.stderr


def test_classify_device_time_counts_each_kernel_once():
    """Synthetic CUDA-style events: ops carry their kernels' self device time; kernel events are skipped."""
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType

    from workloads.profile import classify

    def ev(name, start, end, parent=None, cpu=0.0, dev=0.0, kind=DeviceType.CPU):
        return NS(name=name, time_range=NS(start=start, end=end), cpu_parent=parent, self_cpu_time_total=cpu,
                  self_device_time_total=dev, device_type=kind)

    step = ev(STEP_RANGE, 0, 1000, cpu=50)
    opt = ev("Optimizer.step#AdamW.step", 800, 900, parent=step)
    evs = [step, ev("aten::mm", 10, 20, parent=step, cpu=5, dev=300), opt,
           ev("aten::_foreach_add_", 810, 820, parent=opt, cpu=5, dev=100),
           ev("aten::native_layer_norm", 30, 40, parent=step, cpu=5, dev=50),
           ev("aten::mm", 2000, 2010, cpu=5, dev=999)]  # outside the step range
    b = classify(evs)  # no kernel events in the trace: the ops' self device time
    assert b.time_kind == "self_device" and b.steps == 1 and b.step_s == pytest.approx(1e-3)
    assert b.per_step_s["gemm"] == pytest.approx(300e-6) and b.per_step_s["optimizer"] == pytest.approx(100e-6)
    assert b.per_step_s["memory_bound"] == pytest.approx(50e-6) and b.per_step_s["other"] == 0
    cpu = classify(evs, device=False)
    assert cpu.per_step_s["other"] == pytest.approx(50e-6) and cpu.per_step_s["gemm"] == pytest.approx(5e-6)


def test_classify_device_kernels_counts_linked_and_unlinked_kernels():
    """With the kernels' own events, device time comes from them: a linked kernel goes to its launching op's class,
    an unlinked one inside a step is classed by its name and reported, kernels of ops outside the steps are left
    out, and the classes add up to the kernels' busy time (the ops' self device time is not used)."""
    from types import SimpleNamespace as NS

    from torch.autograd import DeviceType

    from workloads.profile import classify, kernel_class

    def ev(name, start, end, parent=None, dev=0.0, kind=DeviceType.CPU, id=None, link=0):
        return NS(name=name, time_range=NS(start=start, end=end), cpu_parent=parent, self_cpu_time_total=1.0,
                  self_device_time_total=dev, device_type=kind, id=id, linked_correlation_id=link)

    step = ev(STEP_RANGE, 0, 1000, id=1)
    opt = ev("Optimizer.step#AdamW.step", 800, 900, parent=step, id=2)
    evs = [step, opt,
           ev("aten::addmm", 10, 20, parent=step, dev=0.0, id=3),  # its kernel was not linked: self device time 0
           ev("aten::_foreach_mul_", 810, 820, parent=opt, dev=40, id=4),
           ev("aten::native_layer_norm", 30, 40, parent=step, dev=50, id=5),
           ev("aten::mm", 2000, 2010, dev=999, id=6),  # outside the step range
           ev("multi_tensor_apply_kernel", 820, 860, kind=DeviceType.CUDA, link=4),
           ev("vectorized_layer_norm_kernel", 40, 90, kind=DeviceType.CUDA, link=5),
           # a GEMM kernel of a memory-class op (cuDNN's RNN runs GEMMs and element-wise cells): its name decides
           ev("aten::_cudnn_rnn", 100, 110, parent=step, id=7),
           ev("nvjet_sm90_hsh_64x24_64x16_2x4_h_badd_NNT", 100, 120, kind=DeviceType.CUDA, link=7),
           ev("elemWiseRNNcell<__half>", 120, 130, kind=DeviceType.CUDA, link=7),
           ev("nvjet_hsh_256x128_2x1_v_bz_coopB_TNN", 25, 325, kind=DeviceType.CUDA, link=0),  # unlinked, in step
           ev("flash_fwd_kernel", 330, 430, kind=DeviceType.CUDA, link=0),
           ev("ampere_sgemm_128x64_nn", 2010, 3009, kind=DeviceType.CUDA, link=6),  # its op is outside the steps
           ev("Memcpy HtoD (Pageable -> Device)", 1500, 1600, kind=DeviceType.CUDA, link=0),  # between steps
           # a runtime call whose own id collides with the layer norm's: it must not re-class that op's kernels
           ev("cudaLaunchKernel", 31, 32, parent=opt, id=5, link=5),
           # Kineto's device-side copies of the host ranges (gpu_user_annotation): neither a step nor a kernel
           ev(STEP_RANGE, 5, 990, kind=DeviceType.CUDA, link=0),
           ev("Optimizer.step#AdamW.step", 815, 865, kind=DeviceType.CUDA, link=0)]
    b = classify(evs)
    assert b.time_kind == "device_kernels" and b.steps == 1
    assert b.per_step_s["gemm"] == pytest.approx(320e-6) and b.per_step_s["attention"] == pytest.approx(100e-6)
    assert b.per_step_s["optimizer"] == pytest.approx(40e-6) and b.per_step_s["memory_bound"] == pytest.approx(60e-6)
    assert b.per_step_s["other"] == 0 and b.total_s == pytest.approx(520e-6)
    assert b.unlinked_s == pytest.approx(400e-6) and b.to_dict()["unlinked_s"] == pytest.approx(400e-6)
    assert b.step_s == pytest.approx(1e-3) and b.kernel_links == {"linked": 4, "unlinked": 2}
    assert b.to_dict()["kernel_links"] == {"linked": 4, "unlinked": 2}
    assert [kernel_class(n) for n in ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "sm90_xmma_gemm_bf16bf16",
                                      "fmha_cutlassF_bf16_aligned", "elementwise_kernel", "some_kernel",
                                      "GammaBetaBackwardCUDAKernelTemplate<float, float, 32u>",
                                      "void cudnn::fusion::compute_dot_do_o_specialized<true, 128>",
                                      "cub::detail::radix_sort::DeviceRadixSortOnesweepKernel")] == \
        ["communication", "gemm", "attention", "memory_bound", "other", "memory_bound", "attention", "memory_bound"]


def test_classify_trace_reads_a_written_gpu_trace(tmp_path):
    """A Chrome trace as Kineto writes it on a GPU (gzipped): host ops nest by time on their thread, kernels link to
    their op by External id, the device-side annotations of the step and optimizer ranges are not counted."""
    import gzip
    import json

    from workloads.profile import classify_trace

    def x(cat, name, ts, dur, ext, pid=1, tid=1):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                "args": {"External id": ext}}

    evs = [x("user_annotation", STEP_RANGE, 0, 1000, 1), x("cpu_op", "aten::linear", 10, 30, 2),
           x("cpu_op", "aten::addmm", 12, 20, 3),  # nested in aten::linear
           x("user_annotation", "Optimizer.step#AdamW.step", 800, 100, 4), x("cpu_op", "aten::_foreach_mul_", 810, 10, 5),
           x("cpu_op", "aten::add", 40, 5, 6),
           x("kernel", "nvjet_sm90_tst_256x128", 20, 300, 3, pid=0, tid=7),
           x("kernel", "vectorized_elementwise_kernel", 320, 50, 6, pid=0, tid=7),
           x("kernel", "multi_tensor_apply_kernel", 815, 60, 5, pid=0, tid=7),
           x("gpu_user_annotation", STEP_RANGE, 15, 900, 9, pid=0, tid=7),
           x("gpu_user_annotation", "Optimizer.step#AdamW.step", 812, 70, 9, pid=0, tid=7)]
    path = tmp_path / "t.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": evs}).encode()))
    b = classify_trace(path)
    assert b.steps == 1 and b.step_s == pytest.approx(1e-3) and b.kernel_links == {"linked": 3, "unlinked": 0}
    assert b.per_step_s["gemm"] == pytest.approx(300e-6) and b.per_step_s["memory_bound"] == pytest.approx(50e-6)
    assert b.per_step_s["optimizer"] == pytest.approx(60e-6) and b.total_s == pytest.approx(410e-6)
    cpu_only = tmp_path / "cpu.trace.json"
    cpu_only.write_text(json.dumps({"traceEvents": evs[:6]}))
    with pytest.raises(ValueError, match="no device kernels"):
        classify_trace(cpu_only)
