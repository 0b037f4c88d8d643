"""``hweval predict``: JSON keys, batch row order and count, bad inputs exit 2 with one line and no output."""

from __future__ import annotations

import json

import pytest

from hwmodels.predict.layout import INTERLEAVE_SEARCH

REQUIRED = ("tokens_per_s", "tokens_per_s_per_accelerator", "step_time_s", "mfu", "memory_per_accelerator_GiB",
            "fits", "layout", "breakdown_s", "interval", "calibration")


def test_single_json_with_tokens_and_price(cli):
    proc = cli("predict", "--hardware", "h100-sxm", "--accelerators", "64", "--model", "llama3-8b",
               "--global-batch", "256", "--tokens", "1e11", "--pricing", "on_demand", "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    d = json.loads(lines[0])
    for k in REQUIRED + ("time_to_train_s", "accelerator_hours", "cost_usd"):
        assert k in d, k
    assert d["layout"]["dp"] * d["layout"]["tp"] * d["layout"]["pp"] == 64
    assert d["interval"]["level"] == 0.9 and len(d["interval"]["cost_usd"]) == 2
    assert d["seq_len"] == 8192  # the preset's


def test_batch_keeps_row_order_and_count(cli, tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,seq_len,global_batch,tp,pp,sharding,micro_batch,"
                 "activation_checkpointing,layout\n"
                 "a100-80gb-sxm,16,llama2-7b,2048,64,,,,,,\n"
                 "h100-sxm,8,d_model=1024,n_layers=8,n_heads=8,vocab=32000,,,,,,,,\n"
                 "a100-40gb-sxm,32,gpt3-1.3b,,128,2,1,zero1,2,selective,fixed\n")
    # the second row's spec holds commas: quote it
    p.write_text(p.read_text().replace("d_model=1024,n_layers=8,n_heads=8,vocab=32000",
                                       '"d_model=1024,n_layers=8,n_heads=8,vocab=32000"'))
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert [r["hardware"] for r in rows] == ["a100-80gb-sxm", "h100-sxm", "a100-40gb-sxm"]
    assert [r["accelerators"] for r in rows] == [16, 8, 32]
    assert rows[0]["seq_len"] == 2048 and rows[2]["layout"]["tp"] == 2
    assert rows[2]["layout"]["activation_checkpointing"] == "selective"
    for r in rows:
        for k in REQUIRED:
            assert k in r


@pytest.mark.parametrize("args,needle", [
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--precision", "bf17"),
     "--precision: unknown value 'bf17'; valid choices: bf16, fp16, fp32, fp4, fp8"),
    (("--hardware", "h999", "--accelerators", "8", "--model", "llama3-8b"), "--hardware: unknown node 'h999'"),
    (("--hardware", "h100-sxm", "--accelerators", "0", "--model", "llama3-8b"), "--accelerators: expected a positive integer, got '0'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "d_model=64,bogus=2"), "unknown key 'bogus'"),
    (("--hardware", "h100-sxm", "--accelerators", "12", "--model", "llama3-8b", "--tp", "8"),
     "must divide accelerators"),
    (("--accelerators", "8", "--model", "llama3-8b"), "--hardware: required"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--layout", "fixed"),
     "--layout: 'fixed' needs"),
    (("--hardware", "h100-sxm", "--accelerators", "16", "--model", "llama3-8b", "--tp", "2", "--cp", "3"),
     "--cp: tp x pp x cp (2 x 1 x 3) must divide accelerators (16)"),
    (("--hardware", "h100-sxm", "--accelerators", "16", "--model", "llama3-8b", "--seq-len", "1001", "--cp", "2"),
     "--cp: cp 2 must divide the sequence length (1001)"),
    (("--hardware", "h100-sxm", "--accelerators", "16", "--model", "llama3-8b", "--tp-comm-overlap", "yes"),
     "--tp-comm-overlap: unknown value 'yes'; valid choices: false, true"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--activation-checkpointing", "x"),
     "--activation-checkpointing: unknown value 'x'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--pp", "1", "--interleave", "2"),
     "--interleave: 2 needs a pipeline (pp > 1), got pp 1"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--pp", "4", "--interleave", "3"),
     "--interleave: 3 must divide the layers per pipeline stage (8: 32 layers over pp 4)"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--interleave", "0"),
     "--interleave: expected a positive integer, got '0'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--activation-offload", "4"),
     "--activation-offload: h100-sxm has no published host-link bandwidth to price it"),
    (("--hardware", "gb300-nvl72", "--accelerators", "64", "--model", "llama3-70b", "--pp", "4",
      "--activation-offload", "20"), "--activation-offload: 20 must be below the layers of a pipeline stage (20: 80 "
                                     "layers over pp 4)"),
    (("--hardware", "gb300-nvl72", "--accelerators", "8", "--model", "llama3-8b", "--activation-offload", "-1"),
     "--activation-offload: expected an integer >= 0, got '-1'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--framework", "pytorch"),
     "--framework: unknown family 'pytorch'; valid choices: unknown, "),
    (("--hardware", "h200-sxm", "--accelerators", "16", "--model", "llama3-8b", "--accelerators-per-node", "16"),
     "--accelerators-per-node: 16 is more than the catalog's h200-sxm node (8); valid: 1 to 8"),
    (("--hardware", "h200-sxm", "--accelerators", "16", "--model", "llama3-8b", "--accelerators-per-node", "0"),
     "--accelerators-per-node: expected a positive integer, got '0'"),
    (("--hardware", "h200-sxm", "--accelerators", "16", "--model", "llama3-8b", "--inter-node-gbps", "-400"),
     "--inter-node-gbps: expected a positive number, got '-400'"),
    (("--hardware", "h200-sxm", "--accelerators", "16", "--model", "llama3-8b", "--inter-node-gbps", "fast"),
     "--inter-node-gbps: expected a positive number, got 'fast'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--power-limit-w", "0"),
     "--power-limit-w: expected a positive number, got '0'"),
    (("--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama3-8b", "--power-limit-w", "150"),
     "--power-limit-w: 150 W is 21% of h100-sxm's 700 W TDP, below the lowest published point of the curve (29% of "
     "TDP, measured on h100-sxm); valid: 200 W to 700 W"),
])
def test_bad_options_exit_2_one_line(cli, args, needle):
    proc = cli("predict", *args, "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and needle in err[0], proc.stderr


def test_bad_batch_row_names_row_and_column_no_partial_output(cli, tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,sharding\nh100-sxm,8,llama3-8b,\nh100-sxm,8,llama3-8b,zero9\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "row 2, column sharding: unknown value 'zero9'; valid choices: ddp, full_shard, none, shard_grad_op, zero1" in proc.stderr
    q = tmp_path / "u.csv"
    q.write_text("hardware,accelerators,model,colour\nh100-sxm,8,llama3-8b,red\n")
    proc = cli("predict", "--batch", str(q))
    assert proc.returncode == 2 and "column 'colour': unknown column; valid columns: hardware" in proc.stderr


def test_store_kernel_records_are_calibration_source_a(cli, store_path):
    from hwcore.records import KernelRecord
    from hwcore.store import Store

    rec = KernelRecord(kernel="gemm", node_id="h100-sxm", run_id="r1",
                       params={"m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
                       metrics={"flops_per_s": 650e12, "median_s": 1e-3})
    Store(store_path).append(rec.to_record())
    proc = cli("predict", "--hardware", "h100-sxm", "--accelerators", "8", "--model", "llama2-7b",
               "--global-batch", "32", "--json", env={"HWEVAL_STORE": str(store_path)})
    assert proc.returncode == 0, proc.stderr
    cal = json.loads(proc.stdout)["calibration"]
    assert cal["matmul_efficiency.bf16"].startswith("measured") and "r1" in cal["matmul_efficiency.bf16"]
    assert cal["attention_efficiency"].startswith("published")  # no attention record: the next source


def test_context_parallel_and_tp_overlap_options_reach_the_layout(cli, tmp_path):
    """--cp and --tp-comm-overlap (and their CSV columns) are honoured by a fixed layout and by the search; the
    CP split halves each rank's sequence, so the same job is priced differently."""
    base = ("predict", "--hardware", "b200", "--accelerators", "16", "--model", "llama3-8b", "--global-batch", "32",
            "--micro-batch", "1", "--precision", "fp8", "--sharding", "zero1", "--pp", "1",
            "--activation-checkpointing", "none", "--json")
    one = json.loads(cli(*base, "--tp", "2").stdout)
    two = json.loads(cli(*base, "--tp", "2", "--cp", "2", "--tp-comm-overlap", "true").stdout)
    assert one["layout"]["cp"] == 1 and one["layout"]["dp"] == 8 and not one["layout"]["tp_comm_overlap"]
    assert two["layout"]["cp"] == 2 and two["layout"]["dp"] == 4 and two["layout"]["tp_comm_overlap"]
    assert one["step_time_s"] != two["step_time_s"]
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,global_batch,cp,tp_comm_overlap\n"
                 "b200,16,llama3-8b,32,4,false\nb200,16,llama3-8b,32,,\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert rows[0]["layout"]["cp"] == 4 and len(rows) == 2  # stated: kept; empty: searched


def test_a_searched_job_reports_its_memory_safe_pick(cli):
    """--layout auto: the JSON names the fastest layout that fits with the memory model's held-out error as
    headroom, how much slower it is, and its interval; the table says so under the row."""
    args = ("predict", "--hardware", "h100-sxm", "--accelerators", "64", "--model", "llama3-8b")
    proc = cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    ms = d["search"]["memory_safe"]
    assert 0 < ms["margin"] < 5 and "held-out q90" in ms["method"]
    cap = d["memory_GiB"]["capacity_GiB"]
    # the fastest layout of this job fills the capacity (79.4 of 79.6 GiB): any headroom moves the pick
    assert d["memory_per_accelerator_GiB"] * (1 + ms["margin"]) > cap and not ms["is_best"]
    s = ms["layout"]
    assert s["slower_than_best"] >= 0 and s["memory_per_accelerator_GiB"] * (1 + ms["margin"]) <= cap
    assert s["interval"]["level"] == 0.9 and len(s["interval"]["tokens_per_s_per_accelerator"]) == 2
    table = cli(*args)
    assert table.returncode == 0 and "memory-safe alternative" in table.stdout


def test_the_table_prints_each_predictions_notes_once(cli, tmp_path):
    """Without --json the caveats the JSON carries in ``notes`` are printed under the table: those every row
    shares once, each row's own under its number; the memory-safe alternative (its own line) is not repeated."""
    from hweval.commands.predict import note_lines

    rows = [{"notes": ["shared", "only one", "memory-safe alternative: x"]}, {"notes": ["shared", "only two"]}]
    assert note_lines(rows) == ["note (every row): shared", "note (row 1): only one", "note (row 2): only two"]
    assert note_lines([{"notes": ["a", "a"]}]) == ["note (row 1): a"] and note_lines([]) == []
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model\nh100-sxm,64,llama3-8b\ntpu-v6e,256,llama3-70b\n")
    proc = cli("predict", "--batch", str(p))
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())  # rich wraps long lines
    assert "note (row 2): memory: on tpu-v6e the memory model said" in out
    assert "note (every row): layout chosen by the search" in out
    assert "note (row 1): memory: on tpu-v6e" not in out


def test_interleave_option_and_column_reach_the_layout(cli, tmp_path):
    """--interleave (and its CSV column) fixes the virtual pipeline chunks the search prices;
    the stated value is kept (MLPerf 405B configs run 8, which the search's 1/2/4 never tries) and changes the
    bubble; absent, the search picks."""
    base = ("predict", "--hardware", "h100-sxm", "--accelerators", "64", "--model", "llama3-70b", "--global-batch",
            "64", "--micro-batch", "1", "--precision", "bf16", "--sharding", "zero1", "--tp", "8", "--pp", "4",
            "--activation-checkpointing", "full", "--json")
    one = json.loads(cli(*base).stdout)
    five = json.loads(cli(*base, "--interleave", "5").stdout)
    assert one["layout"]["interleave"] in INTERLEAVE_SEARCH and five["layout"]["interleave"] == 5
    assert five["breakdown_s"]["bubble"] < one["breakdown_s"]["bubble"]  # (pp - 1) / v of a stage
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,global_batch,tp,pp,interleave\n"
                 "h100-sxm,64,llama3-70b,64,8,4,5\nh100-sxm,64,llama3-70b,64,8,4,\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert rows[0]["layout"]["interleave"] == 5 and rows[1]["layout"]["interleave"] in INTERLEAVE_SEARCH


def test_activation_offload_option_and_column_reach_the_layout(cli, tmp_path):
    """--activation-offload (and its CSV column) moves that many layers' activations to host memory: less memory
    per GPU, the copies in the exposed communication, the host-link source in the calibration; absent, none."""
    base = ("predict", "--hardware", "gb300-nvl72", "--accelerators", "64", "--model", "llama3-70b",
            "--global-batch", "256", "--micro-batch", "2", "--precision", "fp8", "--sharding", "full_shard", "--tp",
            "1", "--pp", "1", "--cp", "1", "--activation-checkpointing", "none", "--json")
    none = json.loads(cli(*base).stdout)
    off = json.loads(cli(*base, "--activation-offload", "20").stdout)
    assert none["layout"]["offload_layers"] == 0 and off["layout"]["offload_layers"] == 20
    assert off["memory_per_accelerator_GiB"] < none["memory_per_accelerator_GiB"] - 40
    assert off["breakdown_s"]["exposed_comm"] > none["breakdown_s"]["exposed_comm"]
    assert "issues/6491" in off["calibration"]["host_link"]
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,global_batch,micro_batch,precision,tp,pp,activation_checkpointing,"
                 "activation_offload\n"
                 "gb300-nvl72,64,llama3-70b,256,2,fp8,1,1,none,20\ngb300-nvl72,64,llama3-70b,256,2,fp8,1,1,none,\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert rows[0]["layout"]["offload_layers"] == 20 and rows[1]["layout"]["offload_layers"] == 0


def test_framework_option_and_column_price_the_family_with_its_band(cli, tmp_path):
    """--framework (and its CSV column) prices the job with the stated family's fitted factors, without the
    software-stack factor, and carries the framework-stated band (narrower than the framework-unknown one on
    the committed validation file); "unknown" and an empty cell are the default; a family fitted with a lower
    eta predicts a slower step on the same fixed layout."""
    from hwmodels.predict.predictor import ERROR_FILE
    err = json.loads(ERROR_FILE.read_text())
    fams = err["framework_efficiency"]["per_family"]
    base = ("predict", "--hardware", "h100-sxm", "--accelerators", "64", "--model", "llama3-70b", "--global-batch",
            "128", "--micro-batch", "1", "--sharding", "zero1", "--tp", "8", "--pp", "2", "--activation-checkpointing",
            "none", "--layout", "fixed", "--json")
    unk = json.loads(cli(*base).stdout)
    assert unk["framework"] == "unknown" and json.loads(cli(*base, "--framework", "unknown").stdout) == unk
    lo, hi = sorted(("megatron", "torchtitan"), key=lambda f: fams[f]["eta"])
    slow, fast = (json.loads(cli(*base, "--framework", f).stdout) for f in (lo, hi))
    assert slow["framework"] == lo and fast["framework"] == hi
    assert slow["step_time_s"] > fast["step_time_s"]
    assert f"eta = {fams[lo]['eta']:.3f}" in slow["calibration"]["framework_efficiency"]
    assert "no software-stack factor (x1)" in slow["calibration"]["software_stack"]
    assert "framework_stated_band" in slow["interval"]["method"]
    band = err["framework_stated_band"]["known"]["per_hardware"]["h100-sxm"]["band_rel"]
    assert band < err["known_hardware_band"]["per_hardware"]["h100-sxm"]["band_rel"]
    ratio = {f: err["framework_stated_band"]["per_family"]["per_family"][f]["ratio"] for f in (lo, hi)}
    assert ratio["megatron"] == 1.0 and ratio["torchtitan"] > 1.0  # torchtitan's factors carry worse: wider
    for p_, f in ((slow, lo), (fast, hi)):
        assert p_["interval"]["relative"] >= band * ratio[f]  # the calibration term is added in quadrature
        assert p_["interval"]["relative"] < band * ratio[f] + 0.1
    meg = slow if lo == "megatron" else fast
    assert meg["interval"]["relative"] < unk["interval"]["relative"]
    p = tmp_path / "s.csv"
    p.write_text("hardware,accelerators,model,global_batch,tp,pp,framework\n"
                 f"h100-sxm,64,llama3-70b,128,8,2,{lo}\nh100-sxm,64,llama3-70b,128,8,2,\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    assert [r["framework"] for r in rows] == [lo, "unknown"]
    q = tmp_path / "bad.csv"
    q.write_text("hardware,accelerators,model,framework\nh100-sxm,8,llama3-8b,megatron\nh100-sxm,8,llama3-8b,jax\n")
    proc = cli("predict", "--batch", str(q), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "row 2, column framework: unknown family 'jax'; valid choices: unknown," in proc.stderr


def _batch_json(cli, path, extra_columns, rows):
    """``hweval predict --batch`` on ``rows`` under the layout columns plus ``extra_columns``: its JSON objects."""
    path.write_text("hardware,accelerators,model,seq_len,global_batch,sharding,tp,pp,micro_batch,"
                    f"activation_checkpointing,{extra_columns}\n" + "".join(f"{r}\n" for r in rows))
    proc = cli("predict", "--batch", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(x) for x in proc.stdout.strip().splitlines()]


def test_cluster_options_price_a_smaller_board_and_a_stated_network(cli, tmp_path):
    """--accelerators-per-node (a 4-GPU board of an 8-GPU type: its NVLink domain shrinks with it) and
    --inter-node-gbps (the network per node, priced by the link model) change only the exposed communication of a
    job that crosses nodes, and say so in the calibration; inside one node the network does not matter. The same
    columns in a batch file."""
    base = ("--hardware", "h200-sxm", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
            "--sharding", "full_shard", "--tp", "1", "--pp", "1", "--micro-batch", "4",
            "--activation-checkpointing", "full", "--json")

    def run(n, *extra):
        proc = cli("predict", "--accelerators", str(n), *base, *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    eight, four = run(16), run(16, "--accelerators-per-node", "4")
    slow = run(16, "--accelerators-per-node", "4", "--inter-node-gbps", "400")
    assert eight["breakdown_s"]["compute"] == pytest.approx(four["breakdown_s"]["compute"])
    assert eight["breakdown_s"]["exposed_comm"] < four["breakdown_s"]["exposed_comm"] < slow["breakdown_s"]["exposed_comm"]
    assert slow["tokens_per_s_per_accelerator"] < four["tokens_per_s_per_accelerator"]
    cal = " ".join(map(str, slow["calibration"].values()))
    assert "4 accelerators per node" in cal and "400 Gb/s per node" in cal
    one_node = run(8, "--inter-node-gbps", "100")
    assert one_node["step_time_s"] == pytest.approx(run(8)["step_time_s"])
    a, b = _batch_json(cli, tmp_path / "c.csv", "accelerators_per_node,inter_node_gbps",
                       ("h200-sxm,16,llama3-8b,4096,64,full_shard,1,1,4,full,4,400",
                        "h200-sxm,16,llama3-8b,4096,64,full_shard,1,1,4,full,,"))
    assert a["step_time_s"] == pytest.approx(slow["step_time_s"]) and b["step_time_s"] == pytest.approx(eight["step_time_s"])


def test_power_limit_slows_the_compute_and_says_where_the_curve_came_from(cli, tmp_path):
    """--power-limit-w below the TDP scales the compute part of the step (matmul and attention at the sustained
    clock ratio of the published curve) and leaves memory-bound work and communication alone; at or above TDP it
    changes nothing; the JSON carries the limit, the factor and its source, and the calibration names it; a node
    without its own curve borrows H100's at the same fraction of TDP and says so. The same as a batch column."""
    base = ("--accelerators", "8", "--model", "llama3-8b", "--seq-len", "4096", "--global-batch", "64",
            "--sharding", "full_shard", "--tp", "1", "--pp", "1", "--micro-batch", "2",
            "--activation-checkpointing", "full", "--json")

    def run(hw, *extra):
        proc = cli("predict", "--hardware", hw, *base, *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    full, capped, above = run("h100-sxm"), run("h100-sxm", "--power-limit-w", "500"), run("h100-sxm", "--power-limit-w", "800")
    f = capped["power_limit"]["compute_factor"]
    assert 0.8 < f < 0.95 and capped["power_limit"]["tdp_watts"] == 700
    assert capped["breakdown_s"]["compute"] == pytest.approx(full["breakdown_s"]["compute"] / f, rel=0.02)
    assert capped["breakdown_s"]["memory_bound"] == pytest.approx(full["breakdown_s"]["memory_bound"])
    assert full["tokens_per_s_per_accelerator"] * f < capped["tokens_per_s_per_accelerator"] \
        < full["tokens_per_s_per_accelerator"]
    assert "power_limit" in capped["calibration"] and "arXiv:2604.11391" in capped["calibration"]["power_limit"]
    assert above["step_time_s"] == pytest.approx(full["step_time_s"]) and above["power_limit"]["compute_factor"] == 1
    b200 = run("b200", "--power-limit-w", "700")
    assert "carried to b200 at the same fraction of its TDP" in b200["power_limit"]["source"]
    assert b200["notes"][0].startswith("power limit 700 W = 70% of the 1000 W TDP: compute rates x 0.86")
    assert not any(n.startswith("power limit") for n in full["notes"] + above["notes"])
    a, b = _batch_json(cli, tmp_path / "p.csv", "power_limit_w",
                       ("h100-sxm,8,llama3-8b,4096,64,full_shard,1,1,2,full,500",
                        "h100-sxm,8,llama3-8b,4096,64,full_shard,1,1,2,full,"))
    assert a["step_time_s"] == pytest.approx(capped["step_time_s"]) and b["step_time_s"] == pytest.approx(full["step_time_s"])
    assert "power_limit" not in b
    q = tmp_path / "bad.csv"
    q.write_text("hardware,accelerators,model,power_limit_w\nh100-sxm,8,llama3-8b,500\nh100-sxm,8,llama3-8b,100\n")
    proc = cli("predict", "--batch", str(q), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "row 2, column power_limit_w: 100 W is 14% of h100-sxm's 700 W TDP" in proc.stderr


def test_attention_option_prices_the_kernel_a_framework_runs(cli, tmp_path):
    """--attention names one of the node's published kernel curves or 'materialized' (score GEMMs and a softmax);
    the JSON says which was priced; an unknown one exits 2 naming the node's choices; the same as a batch column."""
    base = ("--hardware", "a100-80gb-sxm", "--accelerators", "8", "--model", "llama2-7b", "--seq-len", "4096",
            "--global-batch", "64", "--sharding", "full_shard", "--tp", "1", "--pp", "1", "--micro-batch", "2",
            "--activation-checkpointing", "full", "--json")

    def run(*extra):
        proc = cli("predict", *base, *extra)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])
    own, v1, mat = run(), run("--attention", "flash_attn_1"), run("--attention", "materialized")
    assert own["attention"] == "flash_attn_2" and v1["attention"] == "flash_attn_1" and mat["attention"] == "materialized"
    # FlashAttention v1 runs at about 80 of FA2's 190 TFLOP/s on A100: slower; the materialized core slower still
    assert mat["tokens_per_s_per_accelerator"] < v1["tokens_per_s_per_accelerator"] < own["tokens_per_s_per_accelerator"]
    assert own["breakdown_s"]["exposed_comm"] == pytest.approx(v1["breakdown_s"]["exposed_comm"])
    bad = cli("predict", *base, "--attention", "cudnn")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "--attention: unknown value 'cudnn' for a100-80gb-sxm; valid choices: flash_attn_2, " in bad.stderr
    assert "materialized" in bad.stderr
    p = tmp_path / "a.csv"
    p.write_text("hardware,accelerators,model,attention\nh100-sxm,8,llama3-8b,flash_attn_1\nb200,8,llama3-8b,\n")
    proc = cli("predict", "--batch", str(p), "--json")
    assert proc.returncode == 0, proc.stderr
    a, b = (json.loads(x) for x in proc.stdout.strip().splitlines())
    assert a["attention"] == "flash_attn_1" and b["attention"] == "cudnn"  # Blackwell's own: the fastest published
    q = tmp_path / "bad.csv"
    q.write_text("hardware,accelerators,model,attention\nh100-sxm,8,llama3-8b,\na100-80gb-sxm,8,llama3-8b,cudnn\n")
    proc = cli("predict", "--batch", str(q), "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "row 2, column attention: unknown value 'cudnn' for a100-80gb-sxm; valid choices: flash_attn_2" in proc.stderr


def test_nothing_fits_shows_the_fastest_layout_within_the_memory_error(cli):
    """Where no layout fits by the memory model's point estimate, the CLI prices the fastest one within the model's
    held-out error of the capacity (fits false, the least-memory layout beside it); far beyond that error, the
    least-memory layout, as before."""
    base = ("predict", "--hardware", "a100-80gb-sxm", "--model", "llama2-70b", "--global-batch", "64", "--sharding",
            "zero1", "--tp", "8", "--activation-checkpointing", "none", "--json")
    near = json.loads(cli(*base, "--accelerators", "16", "--pp", "2").stdout)
    assert near["fits"] is False and near["search"]["fitting_priced"] == 0
    assert "within the model's held-out q90 error" in near["search"]["note"]
    assert near["search"]["least_memory"]["memory_per_accelerator_GiB"] < near["memory_per_accelerator_GiB"]
    assert near["layout"]["activation_checkpointing"] == "none"
    assert near["layout"]["micro_batch"] == 1  # none stated: the smallest, not the largest at the error's edge
    stated = json.loads(cli(*base, "--accelerators", "16", "--pp", "2", "--micro-batch", "2").stdout)
    assert stated["layout"]["micro_batch"] == 2 and stated["fits"] is False
    far = json.loads(cli(*base, "--accelerators", "8", "--pp", "1").stdout)
    assert far["fits"] is False and far["search"]["note"] == "no layout fits in memory; the least-memory layout is shown"
    assert far["memory_per_accelerator_GiB"] > 80 and far["step_time_s"] > 0
    assert "least-memory layout, priced anyway" in far["notes"][-1]
