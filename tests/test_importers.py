"""hweval.importers: nccl-tests and MLPerf parsers on hand-made fixtures, the import CLI, fit comms on a raw log."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hwcore.errors import InputError
from hwcore.records import KernelRecord, MlperfRecord, read
from hwcore.store import Store
from hweval.cli import main
from hweval.importers import mlperf as ML
from hweval.importers import nccl_tests as NT
from hweval.importers.common import Source

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "imports"
REF = ROOT / "data" / "reference" / "nccl_tests"


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# ------------------------------------------------------------------ nccl-tests parser
def test_parse_full_header_all_gather():
    (log,) = NT.parse_file(str(DATA / "all_gather_perf_h100_8gpu.log"))
    assert log.collective == "all_gather" and log.ranks == 8 and log.nodes == 1
    assert log.device_names == ("NVIDIA H100 80GB HBM3",)
    assert log.nccl_version == "2.19.3+cuda12.3" and log.tests_version == "2.13.9"
    assert log.header["iters"] == 20 and log.header["warmup_iters"] == 5 and log.header["maxBytes"] == 16777216
    assert len(log.rows) == 5
    r = log.rows[0]
    assert (r.size_bytes, r.count, r.dtype, r.redop, r.root) == (1048576, 32768, "float", "none", -1)
    assert r.time_s == pytest.approx(20e-6) and r.busbw == pytest.approx(45.88e9) and r.algbw == pytest.approx(52.43e9)
    assert r.inplace_time_s == pytest.approx(19.5e-6) and r.wrong == 0 and r.line == 19
    assert log.avg_busbw == pytest.approx(102.9e9)
    assert NT.match_node_id(log) == "h100-sxm"


def test_parse_legacy_format_without_root_column():
    (log,) = NT.parse_file(str(DATA / "legacy_all_reduce_perf_v100_2gpu.log"))
    assert log.collective == "all_reduce"  # from the file name
    assert log.ranks == 2 and log.device_names == ("Tesla V100-SXM2-16GB",)
    assert [r.root for r in log.rows] == [None] * 4
    assert log.rows[-1].busbw == pytest.approx(25.89e9) and log.rows[-1].wrong == 0.0


def test_parse_launcher_prefixes_and_chatter():
    (b,) = NT.parse_file(str(DATA / "broadcast_tagged.log"))  # Open MPI --tag-output, an NCCL INFO line inside
    assert b.collective == "broadcast" and b.ranks == 4 and b.hosts == ("node-a", "node-b") and b.nodes == 2
    assert [r.root for r in b.rows] == [0] * 4 and len(b.rows) == 4
    (a,) = NT.parse_file(str(DATA / "alltoall_srun.log"), ranks=16)  # srun --label, no rank lines
    assert a.collective == "alltoall" and a.ranks == 16 and a.nodes is None
    assert all(r.inplace_wrong is None for r in a.rows)  # "N/A"
    (a2,) = NT.parse_file(str(DATA / "alltoall_srun.log"))
    assert a2.ranks is None


def test_malformed_row_names_file_and_line():
    with pytest.raises(InputError, match=r"malformed_all_reduce_perf\.log:6: time '1O\.50' is not a number"):
        NT.parse_file(str(DATA / "malformed_all_reduce_perf.log"))


def test_wrong_column_count_and_unknown_collective(tmp_path):
    p = tmp_path / "run.log"
    p.write_text("#  Rank  0 Group  0 Pid 1 on h device  0 [0x1] NVIDIA H100 80GB HBM3\n"
                 "        1024   256   float   sum   -1   10.0   0.1   0.1   0   10.0   0.1\n")
    with pytest.raises(InputError, match=r"run\.log:2: a result row needs 13 columns"):
        NT.parse_file(str(p))
    p.write_text("        1024   256   float   sum   -1   10.0   0.1   0.1   0   10.0   0.1   0.1   0\n")
    with pytest.raises(InputError, match=r"run\.log:1: cannot tell which collective.*--collective"):
        NT.parse_file(str(p))
    assert NT.parse_file(str(p), collective="reduce_scatter")[0].collective == "reduce_scatter"
    with pytest.raises(InputError, match="--collective: unknown value 'allreduce'"):
        NT.parse_file(str(p), collective="allreduce")
    q = tmp_path / "empty_all_reduce_perf.log"
    q.write_text("# nothing here\n")
    with pytest.raises(InputError, match="no nccl-tests result rows"):
        NT.parse_file(str(q))


def test_public_reference_logs_parse():
    counts = {"dgx_h100_8gpu_all_reduce.log": (32, 8), "aws_p5_2node_16gpu_all_reduce.log": (32, None),
              "aws_p4de_2node_16gpu_all_reduce.log": (29, None), "gcp_a3mega_2node_16gpu_all_reduce.log": (31, 16)}
    for name, (rows, ranks) in counts.items():
        (log,) = NT.parse_file(str(REF / name))
        assert (len(log.rows), log.ranks, log.collective) == (rows, ranks, "all_reduce")
    assert NT.parse_file(str(REF / "dgx_h100_8gpu_all_reduce.log"))[0].rows[-1].busbw == pytest.approx(479.90e9)


def test_sniff_log_vs_csv():
    assert NT.looks_like_nccl_tests(str(DATA / "alltoall_srun.log"))
    assert NT.looks_like_nccl_tests(str(REF / "dgx_h100_8gpu_all_reduce.log"))
    assert not NT.looks_like_nccl_tests(str(ROOT / "tests/data/nccl_tests_issue44_allreduce_2gpu.csv"))


# ------------------------------------------------------------------ import nccl-tests (CLI, store)
def test_import_nccl_tests_writes_records_with_provenance(tmp_path, capsys):
    store = tmp_path / "store"
    f = DATA / "all_gather_perf_h100_8gpu.log"
    rc, out, err = run(capsys, "import", "nccl-tests", str(f), str(DATA / "broadcast_tagged.log"), "--store", str(store),
                       "--json")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["imported"] == 9
    recs = read(Store(store), KernelRecord)
    assert len(recs) == 9 and {r.kind for r in recs} == {"kernel"}
    ag = [r for r in recs if r.kernel == "all_gather"]
    assert len(ag) == 5 and ag[0].node_id == "h100-sxm" and ag[0].device == "NVIDIA H100 80GB HBM3"
    p = ag[0].params
    assert p["source_sha256"] == hashlib.sha256(f.read_bytes()).hexdigest()
    assert p["source_path"] == str(f.resolve()) and p["importer"] == "nccl-tests" and p["importer_version"] == NT.VERSION
    assert {p["size_bytes"], p["count"], p["type"], p["redop"], p["root"], p["ranks"]} >= {1048576, 32768, "float"}
    assert p["ranks"] == 8 and p["world_size"] == 8 and p["source_line"] == 19
    m = ag[0].metrics
    assert m["busbw_bytes_per_s"] == pytest.approx(45.88e9) and m["inplace_time_s"] == pytest.approx(19.5e-6)
    assert m["wrong"] == 0
    assert ag[0].fingerprint["imported"] is True  # not this machine's fingerprint
    bc = [r for r in recs if r.kernel == "broadcast"]
    assert bc[0].node_id == "a100-80gb-sxm" and bc[0].params["nodes"] == 2


def test_import_nccl_tests_node_option_and_ranks(tmp_path, capsys):
    store = tmp_path / "s"
    rc, _, err = run(capsys, "import", "nccl-tests", str(DATA / "alltoall_srun.log"), "--store", str(store))
    assert rc == 2 and "--ranks" in err and not store.exists()
    rc, _, err = run(capsys, "import", "nccl-tests", str(DATA / "alltoall_srun.log"), "--ranks", "16", "--node",
                     "h100-sxm", "--store", str(store))
    assert rc == 0, err
    recs = read(Store(store), KernelRecord)
    assert {r.node_id for r in recs} == {"h100-sxm"} and recs[0].params["ranks"] == 16
    rc, _, err = run(capsys, "import", "nccl-tests", str(DATA / "alltoall_srun.log"), "--ranks", "16", "--node",
                     "h9000", "--store", str(store))
    assert rc == 2 and "--node" in err and "h100-sxm" in err


def test_import_malformed_among_good_files_writes_nothing(tmp_path, capsys):
    store = tmp_path / "store"
    rc, out, err = run(capsys, "import", "nccl-tests", str(DATA / "all_gather_perf_h100_8gpu.log"),
                       str(DATA / "malformed_all_reduce_perf.log"), "--store", str(store))
    assert rc == 2
    assert err.count("\n") == 1 and "malformed_all_reduce_perf.log:6:" in err
    assert not store.exists() or not list(store.glob("**/*.parquet"))


# ------------------------------------------------------------------ MLPerf
def test_parse_mlperf_runs_and_system():
    runs, systems = ML.parse_all([str(DATA / "mlperf")])
    assert len(runs) == 5 and {r.benchmark for r in runs} == {"resnet"}
    by = {Path(r.source.path).name: r for r in runs}
    r0 = by["result_0.txt"]
    assert r0.time_to_train_s == pytest.approx(20 * 60) and r0.converged and r0.global_batch_size == 3264
    assert r0.submission["org"] == "ExampleOrg" and r0.platform == "dgx_h100_x2"
    assert [e.epoch_num for e in r0.evals] == [5, 9, 13, 17] and r0.evals[-1].value == pytest.approx(0.7601)
    assert not by["result_4.txt"].converged and by["result_4.txt"].run_status == "aborted"
    assert systems["dgx_h100_x2"].accelerators == 16
    assert systems["dgx_h100_x2"].fields["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB"


def test_olympic_mean_rules():
    assert ML.olympic_mean([1.0, 2.0, 3.0, 4.0, 100.0])["time_to_train_s"] == pytest.approx(3.0)
    one_bad = ML.olympic_mean([20.0, 21.0, 19.5, 22.0, None])  # the aborted run counts as the slowest
    assert one_bad["valid"] and one_bad["time_to_train_s"] == pytest.approx(21.0) and one_bad["kept"] == 3
    assert not ML.olympic_mean([1.0, None, None, 2.0, 3.0])["valid"]
    assert not ML.olympic_mean([1.0, 2.0])["valid"]


def test_import_mlperf_cli(tmp_path, capsys):
    store = tmp_path / "store"
    rc, out, err = run(capsys, "import", "mlperf", str(DATA / "mlperf"), "--store", str(store), "--json")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["imported"] == 6 and summary["runs"] == 5 and summary["warnings"] == []
    (res,) = summary["results"]
    assert res["valid"] and res["time_to_train_s"] == pytest.approx(21 * 60) and res["accelerators"] == 16
    recs = read(Store(store), MlperfRecord)
    runs = [r for r in recs if r.aggregate == "run"]
    om = [r for r in recs if r.aggregate == "olympic_mean"]
    assert len(runs) == 5 and len(om) == 1
    assert om[0].time_to_train_s == pytest.approx(1260) and om[0].olympic["non_converging"] == 1
    assert len(om[0].provenance["sources"]) == 5 and "training_rules.adoc" in om[0].provenance["rules"]
    failed = [r for r in runs if r.status == "failed"]
    assert len(failed) == 1 and failed[0].time_to_train_s is None and failed[0].run_status == "aborted"
    ok = [r for r in runs if r.ok][0]
    assert ok.system_desc["number_of_nodes"] == 2 and ok.accelerators == 16 and len(ok.eval_curve) == 4
    assert ok.node_id == "h100-sxm" and ok.fingerprint["imported"] is True
    assert ok.provenance["source_sha256"] == hashlib.sha256(Path(ok.provenance["source_path"]).read_bytes()).hexdigest()


def test_import_mlperf_malformed_line_writes_nothing(tmp_path, capsys):
    store = tmp_path / "store"
    rc, _, err = run(capsys, "import", "mlperf", str(DATA / "mlperf"), str(DATA / "mlperf_bad"), "--store", str(store))
    assert rc == 2 and "mlperf_bad/result_0.txt:7:" in err and "not valid JSON" in err
    assert not store.exists() or not list(store.glob("**/*.parquet"))


def test_mlperf_structural_errors(tmp_path):
    p = tmp_path / "result_0.txt"
    p.write_text(':::MLLOG {"time_ms": 1, "key": "submission_benchmark", "value": "bert"}\n')
    with pytest.raises(InputError, match="no run_start"):
        ML.parse_result(Source.read(p))
    p.write_text(':::MLLOG {"time_ms": "soon", "key": "run_start"}\n')
    with pytest.raises(InputError, match=r"result_0\.txt:1: .*time_ms"):
        ML.parse_result(Source.read(p))
    p.write_text("plain text\n")
    with pytest.raises(InputError, match="no ':::MLLOG' lines"):
        ML.parse_result(Source.read(p))
    s = tmp_path / "sys.json"
    s.write_text('{"accelerator_model_name": "X", "accelerators_per_node": 8}')
    with pytest.raises(InputError, match="lacks number_of_nodes"):
        ML.parse_system(Source.read(s))


# ------------------------------------------------------------------ fit comms on a raw log
def test_fit_comms_on_raw_log(capsys):
    rc, out, err = run(capsys, "fit", "comms", str(REF / "dgx_h100_8gpu_all_reduce.log"), "--min-size", "32768",
                       "--max-size", "268435456", "--predict", "17179869184", "--level", "0.9", "--json")
    assert rc == 0, err
    o = json.loads(out)
    assert o["model"] == "ramp" and o["collective"] == "all_reduce" and o["ranks"] == 8
    assert o["source"]["format"] == "nccl-tests" and len(o["source"]["sha256"]) == 64
    (p,) = o["predictions"]
    assert p["busbw_lo"] <= 479.90 <= p["busbw_hi"]  # the published 16 GiB busbw, GB/s
    assert abs(p["busbw"] / 479.90 - 1) < 0.10


def test_fit_comms_raw_log_needs_ranks_when_absent(capsys):
    f = str(REF / "aws_p5_2node_16gpu_all_reduce.log")
    rc, _, err = run(capsys, "fit", "comms", f)
    assert rc == 2 and "--ranks" in err
    rc, out, err = run(capsys, "fit", "comms", f, "--ranks", "16", "--model", "alpha-beta", "--json")
    assert rc == 0, err
    o = json.loads(out)
    assert o["model"] == "alpha-beta" and "beta_bytes_per_s" in o and o["ranks"] == 16
    rc, _, err = run(capsys, "fit", "comms", str(DATA / "malformed_all_reduce_perf.log"))
    assert rc == 2 and "malformed_all_reduce_perf.log:6:" in err


def test_mlperf_rank_prefixes_and_duplicate_events(tmp_path):
    ev = lambda t, k, v=None, md=None: (f'[{t % 2}] :::MLLOG ' + json.dumps(
        {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": k, "value": v, "metadata": md or {}}))
    lines = [ev(10, "submission_benchmark", "bert"), ev(1000, "run_start"), ev(1001, "run_start"),
             ev(5000, "eval_accuracy", 0.72, {"epoch_num": 2030855}), ev(5001, "eval_accuracy", 0.72, {"epoch_num": 2030855}),
             ev(9000, "run_stop", None, {"status": "success"}), ev(9003, "run_stop", None, {"status": "success"})]
    p = tmp_path / "result_0.txt"
    p.write_text("\n".join(lines) + "\n")
    r = ML.parse_result(Source.read(p))
    assert r.time_to_train_s == pytest.approx(8.0) and len(r.evals) == 1 and r.converged
    p.write_text("\n".join(lines + [ev(9500, "run_start")]) + "\n")
    with pytest.raises(InputError, match=r"result_0\.txt:8: run_start after run_stop"):
        ML.parse_result(Source.read(p))


def test_fit_comms_projects_to_other_ranks_through_catalog_links(capsys):
    f = str(REF / "dgx_h100_8gpu_all_reduce.log")
    args = ("fit", "comms", f, "--min-size", "32768", "--max-size", "268435456", "--predict", "17179869184",
            "--predict-ranks", "16", "--level", "0.9", "--json")
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    o = json.loads(out)
    assert o["link_node"] == "h100-sxm" and o["predict_ranks"] == 16  # matched from the log's GPU names
    (p,) = o["predictions"]
    assert p["busbw_lo"] <= 487.09 <= p["busbw_hi"]  # the published 2 x p5 (16 ranks) busbw at 16 GiB
    rc, _, err = run(capsys, *args, "--node", "h9000")
    assert rc == 2 and err.startswith("hweval: error: --node") and "h100-sxm" in err


def test_sweeps_read_back_from_store_fit_like_the_log(tmp_path, capsys):
    import numpy as np

    from hwmodels.comms import CommsModel

    store = tmp_path / "store"
    f = REF / "dgx_h100_8gpu_all_reduce.log"
    assert run(capsys, "import", "nccl-tests", str(f), "--store", str(store))[0] == 0
    (sw,) = NT.sweeps_from_store(Store(store), collective="all_reduce")
    assert sw["ranks"] == 8 and sw["node_id"] == "h100-sxm" and sw["size_bytes"].size == 64
    assert NT.sweeps_from_store(Store(store), collective="all_gather") == []
    (log,) = NT.parse_file(str(f))
    s, t, _ = log.arrays()
    _, ti, _ = log.arrays(inplace=True)
    a = CommsModel().fit(sw["size_bytes"], time_s=sw["time_s"], ranks=sw["ranks"])
    b = CommsModel().fit(np.r_[s, s], time_s=np.r_[t, ti], ranks=8)
    assert a.busbw_inf == pytest.approx(b.busbw_inf, rel=1e-9)


def test_fit_comms_csv_rejects_non_positive_size(tmp_path, capsys):
    p = tmp_path / "c.csv"
    p.write_text("size,busbw\n1024,1.0\n-2048,2.0\n4096,3.5\n8192,5.0\n")
    rc, _, err = run(capsys, "fit", "comms", str(p), "--size", "size", "--busbw", "busbw", "--ranks", "2")
    assert rc == 2 and "c.csv line 3" in err and "> 0" in err


def test_mlperf_training_throughput_over_blocks_only(tmp_path):
    """Samples trained / summed block spans: evaluations and init between the blocks are not counted; duplicate
    rank events open and close a block once; a run resumed at a nonzero count counts only what it trained."""
    ev = lambda t, k, v=None, md=None: (f'[{t % 2}] :::MLLOG ' + json.dumps(
        {"namespace": "", "time_ms": t, "event_type": "POINT_IN_TIME", "key": k, "value": v, "metadata": md or {}}))
    lines = [ev(10, "submission_benchmark", "llama31_8b"), ev(1000, "run_start"),
             ev(1100, "epoch_start", None, {"samples_count": 64}),
             ev(2000, "block_start", None, {"samples_count": 512}), ev(2001, "block_start", None, {"samples_count": 512}),
             ev(12000, "block_stop", None, {"samples_count": 512}), ev(12002, "block_stop", None, {"samples_count": 512}),
             ev(12000, "eval_start", None, {"samples_count": 576}),
             ev(20000, "eval_accuracy", 3.4, {"samples_count": 576}), ev(20000, "eval_stop", None, {"samples_count": 576}),
             ev(20000, "block_start", None, {"samples_count": 512}), ev(25000, "block_stop", None, {"samples_count": 512}),
             ev(25000, "eval_start", None, {"samples_count": 832}),
             ev(40000, "run_stop", None, {"status": "success", "samples_count": 832})]
    p = tmp_path / "result_0.txt"
    p.write_text("\n".join(lines) + "\n")
    r = ML.parse_result(Source.read(p))
    assert r.blocks == 2 and r.block_time_s == pytest.approx(15.0)
    assert r.train_samples == pytest.approx(768.0)  # 832 at the end less the 64 it resumed at
    assert r.train_samples_per_s == pytest.approx(768 / 15.0)
    assert r.time_to_train_s == pytest.approx(39.0)  # the time to train still includes the evaluation
    p.write_text("\n".join(lines[:2] + [ev(3000, "run_stop", None, {"status": "success"})]) + "\n")
    r = ML.parse_result(Source.read(p))
    assert r.blocks == 0 and r.block_time_s is None and r.train_samples_per_s is None
    p.write_text("\n".join(lines[:3] + [ev(5000, "block_start"), ev(4000, "block_stop")]) + "\n")
    with pytest.raises(InputError, match=r"result_0\.txt:5: block_stop is before its block_start"):
        ML.parse_result(Source.read(p))
