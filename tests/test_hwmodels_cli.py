"""``hweval fit ...`` and ``hweval cost`` on plain CSV: JSON shapes, bad rows, exit 2; no torch/jax in hwmodels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parent.parent


def _json(proc):
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_hwmodels_never_imports_torch_or_jax():
    mods = ["hwmodels", "hwmodels.errors", "hwmodels.units", "hwmodels.results", "hwmodels.csvio", "hwmodels.catalog",
            "hwmodels.roofline", "hwmodels.scaling", "hwmodels.comms", "hwmodels.convergence", "hwmodels.cost",
            "hwmodels.prices", "hwmodels.scaling_law", "hwmodels.nccl_tests", "hwmodels.dtypes"]
    found = sorted(p.stem for p in (REPO / "hwmodels").glob("*.py") if p.stem != "__init__")
    assert set(found) <= {m.split(".")[-1] for m in mods}, "a new hwmodels module is missing from this test"
    code = ("import sys\n" + "".join(f"import {m}\n" for m in mods)
            + "from hwmodels.catalog import default_catalog; default_catalog()\n"
            + "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'jaxlib')]\n"
            + "print(','.join(bad)); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(REPO))
    assert proc.returncode == 0, f"hwmodels imported: {proc.stdout} {proc.stderr}"


def test_fit_scaling_json(cli, tmp_path):
    src = (DATA / "usl_specsdm91.csv").read_text()
    p = tmp_path / "s.csv"
    p.write_text(src + "300,\n400,n/a\n")
    out = _json(cli("fit", "scaling", str(p), "--x", "load", "--y", "throughput", "--model", "usl",
                    "--predict", "1,64,300", "--json"))
    assert out["model"] == "usl"
    assert set(out["params"]) == {"x1", "sigma", "kappa"}
    assert set(out["conf_int"]) == set(out["params"]) and all(len(v) == 2 for v in out["conf_int"].values())
    assert [p["x"] for p in out["predictions"]] == [1, 64, 300]
    assert all({"x", "y", "lo", "hi"} <= set(p) and p["lo"] <= p["y"] <= p["hi"] for p in out["predictions"])
    assert out["params"]["sigma"] == pytest.approx(0.0277285, rel=1e-3)
    assert out["bad_rows"] == {"count": 2, "first_line": 13, "columns": ["load", "throughput"]}
    auto = _json(cli("fit", "scaling", str(DATA / "usl_specsdm91.csv"), "--x", "load", "--y", "throughput", "--json"))
    assert auto["model"] == "usl" and auto["criterion"] == "bic"


def test_fit_scaling_bad_input_exit_2(cli, tmp_path):
    p = DATA / "usl_specsdm91.csv"
    r = cli("fit", "scaling", str(p), "--x", "users", "--y", "throughput", "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert "--x 'users'" in r.stderr and "columns present: load, throughput" in r.stderr
    r = cli("fit", "scaling", str(p), "--x", "load", "--y", "throughput", "--predict", "1,x")
    assert r.returncode == 2 and "--predict" in r.stderr
    r = cli("fit", "scaling", str(p), "--x", "load", "--y", "throughput", "--model", "gustafson")
    assert r.returncode == 2
    r = cli("fit", "scaling", str(tmp_path / "missing.csv"), "--x", "a", "--y", "b")
    assert r.returncode == 2 and "no such file" in r.stderr
    e = tmp_path / "e.csv"
    e.write_text("load,throughput\nx,y\n")
    r = cli("fit", "scaling", str(e), "--x", "load", "--y", "throughput")
    assert r.returncode == 2 and "no usable rows" in r.stderr


def test_fit_convergence_json(cli, tmp_path):
    rng = np.random.default_rng(0)
    x = np.geomspace(100, 1e5, 30)
    y = 50 * x**-0.5 + 2 + rng.normal(0, 0.01, x.size)
    p = tmp_path / "c.csv"
    p.write_text("step,eval_loss\n" + "".join(f"{a},{b}\n" for a, b in zip(x, y)) + "5,\n")
    out = _json(cli("fit", "convergence", str(p), "--x", "step", "--y", "eval_loss", "--target", "2.3", "--level", "0.9",
                    "--json"))
    for k in ("model", "params", "x_to_target", "lo", "hi", "reachable"):
        assert k in out
    assert out["model"] == "power" and out["reachable"] is True
    assert out["lo"] <= out["x_to_target"] <= out["hi"]
    assert out["x_to_target"] == pytest.approx((50 / 0.3) ** 2, rel=0.05)
    assert out["bad_rows"]["count"] == 1 and out["bad_rows"]["first_line"] == 32
    un = cli("fit", "convergence", str(p), "--x", "step", "--y", "eval_loss", "--target", "1.5", "--json")
    o = _json(un)
    assert o["reachable"] is False and o["x_to_target"] == "inf" and "asymptote" in o["message"]
    assert "asymptote" in un.stderr


def test_fit_comms_json(cli, tmp_path):
    out = _json(cli("fit", "comms", str(DATA / "nccl_tests_issue44_allreduce_2gpu.csv"), "--size", "size", "--busbw",
                    "busbw", "--ranks", "2", "--predict", "1e6,1e9", "--json"))
    assert {"alpha_s", "beta_bytes_per_s", "predictions"} <= set(out)
    assert [p["size"] for p in out["predictions"]] == [1e6, 1e9]
    assert all({"size", "busbw"} <= set(p) for p in out["predictions"])
    assert out["predictions"][1]["busbw"] > out["predictions"][0]["busbw"]
    assert 10e9 < out["beta_bytes_per_s"] < 30e9
    r = cli("fit", "comms", str(DATA / "nccl_tests_issue44_allreduce_2gpu.csv"), "--size", "size", "--busbw", "busbw")
    assert r.returncode == 2 and "--ranks" in r.stderr
    p = tmp_path / "r.csv"
    p.write_text("size,busbw,ranks\n1000,0.1,8\n1000000,10,8\n100000000,40,8\n1e9,bad,8\n")
    out = _json(cli("fit", "comms", str(p), "--size", "size", "--busbw", "busbw", "--json"))
    assert out["ranks"] == 8 and out["bad_rows"]["count"] == 1 and out["bad_rows"]["first_line"] == 5


def test_fit_roofline_json(cli, tmp_path):
    rng = np.random.default_rng(1)
    F = np.geomspace(1e6, 1e10, 40)
    Q = F / np.geomspace(0.05, 200, 40)
    t = np.maximum(F / 2e11, Q / 3e10) * np.exp(rng.normal(0, 0.02, 40))
    p = tmp_path / "k.csv"
    p.write_text("f,b,s\n" + "".join(f"{a},{b},{c}\n" for a, b, c in zip(F, Q, t)) + "1,,1\n")
    out = _json(cli("fit", "roofline", str(p), "--flops", "f", "--bytes", "b", "--seconds", "s", "--json"))
    assert {"peak_flops_per_s", "peak_bytes_per_s", "ridge_intensity"} <= set(out)
    assert out["peak_flops_per_s"] == pytest.approx(2e11, rel=0.1)
    assert out["peak_bytes_per_s"] == pytest.approx(3e10, rel=0.1)
    assert out["ridge_intensity"] == pytest.approx(out["peak_flops_per_s"] / out["peak_bytes_per_s"])
    assert out["bad_rows"]["count"] == 1
    r = cli("fit", "roofline", str(p), "--flops", "f", "--bytes", "bytes", "--seconds", "s")
    assert r.returncode == 2 and "--bytes 'bytes'" in r.stderr and "columns present: f, b, s" in r.stderr


def _workload_csv(tmp_path):
    rng = np.random.default_rng(2)
    x = np.geomspace(1e3, 1e7, 20)
    y = 20 * x**-0.3 + 1.5 + rng.normal(0, 0.002, x.size)
    p = tmp_path / "w.csv"
    p.write_text("node,nodes,samples_per_s,samples,loss\n"
                 "h100-sxm,1,1000,,\nh100-sxm,1,1020,,\nh100-sxm,1,990,,\n"
                 "a100-80gb-sxm,1,400,,\na100-80gb-sxm,1,410,,\na100-80gb-sxm,1,oops,,\n"
                 "tpu-v5p,1,300,,\ntpu-v5p,1,310,,\n"
                 + "".join(f",,,{a},{b}\n" for a, b in zip(x, y)))
    return p


def test_cost_csv_json(cli, tmp_path):
    p = _workload_csv(tmp_path)
    r = cli("cost", "--catalog", str(REPO / "data" / "catalog"), "--workload-results", str(p), "--target", "loss=1.9",
            "--json")
    out = _json(r)
    rows = out["rows"]
    assert rows and all({"node", "pricing", "time_to_target_s", "cost_usd", "lo", "hi"} <= set(x) for x in rows)
    assert [x["cost_usd"] for x in rows] == sorted(x["cost_usd"] for x in rows)
    assert {x["node"] for x in rows} == {"h100-sxm", "a100-80gb-sxm", "tpu-v5p"}
    assert all(x["lo"] <= x["cost_usd"] <= x["hi"] for x in rows)
    assert out["bad_rows"]["count"] == 1 and out["bad_rows"]["first_line"] == 7
    assert "skipped 1 row" in r.stderr
    assert out["pareto"] and out["break_even"] and out["sensitivity"]
    one = _json(cli("cost", "--catalog", str(REPO / "data" / "catalog" / "h100-sxm.toml"), "--workload-results",
                    str(_one_node_csv(tmp_path)), "--target", "samples=3.6e6", "--pricing", "on_demand", "--json"))
    from hwmodels.catalog import load_node  # 3.6e6 samples at 1000/s = 1 node-hour at the catalog rate

    h100_hourly = load_node(REPO / "data" / "catalog" / "h100-sxm.toml").price_per_hour("on_demand")
    assert len(one["rows"]) == 1 and one["rows"][0]["cost_usd"] == pytest.approx(h100_hourly)


def _one_node_csv(tmp_path):
    p = tmp_path / "one.csv"
    p.write_text("node,samples_per_s\nh100-sxm,1000\nh100-sxm,1000\n")
    return p


def test_cost_bad_input_exit_2(cli, tmp_path):
    p = _workload_csv(tmp_path)
    r = cli("cost", "--workload-results", str(p), "--target", "speed=3", "--json")
    assert r.returncode == 2 and "--target" in r.stderr and r.stdout == ""
    r = cli("cost", "--workload-results", str(p), "--json")
    assert r.returncode == 2 and "--target" in r.stderr
    r = cli("cost", "--workload-results", str(p), "--catalog", str(tmp_path / "none.toml"), "--target", "samples=1")
    assert r.returncode == 2 and "catalog" in r.stderr
    q = tmp_path / "u.csv"
    q.write_text("node,samples_per_s\nh900,5\n")
    r = cli("cost", "--workload-results", str(q), "--target", "samples=1e6")
    assert r.returncode == 2 and "h100-sxm" in r.stderr  # lists valid ids
    r = cli("cost", "--workload-results", "no-such-run", "--target", "samples=1e6")
    assert r.returncode == 2 and "no workload records" in r.stderr


def test_cost_from_store_run_id(cli, store_path):
    from hwcore.store import Record, Store

    fp_cpu = {"cpu_model": "AMD EPYC", "cpu_flags": {"avx512f": True, "avx512_bf16": True}, "cores_usable": 2,
              "gpus": [], "node_id": "n1"}
    # the workloads runner's curve shape: step, tokens, seconds, loss (samples = step x params.batch_size)
    curve = [{"step": s, "tokens": s * 8 * 64, "seconds": s * 0.1, "loss": 20 * (s * 8) ** -0.3 + 1.5}
             for s in range(10, 2000, 100)]
    recs = [Record(kind="workload", name="tiny_gpt", run_id="run-A", fingerprint=fp_cpu, params={"batch_size": 8},
                   metrics={"samples_per_s": 50.0 + i, "loss_curve": curve}) for i in range(3)]
    recs.append(Record(kind="workload", name="tiny_gpt", run_id="run-A", fingerprint=fp_cpu,
                       metrics={"samples_per_s": 51.0, "loss_curve": curve}))  # no batch_size: curve unusable
    recs.append(Record(kind="workload", name="tiny_gpt", run_id="run-A", fingerprint=fp_cpu, status="oom", metrics={}))
    recs.append(Record(kind="workload", name="tiny_gpt", run_id="run-A", fingerprint={"cpu_model": "Apple M2"},
                       metrics={"samples_per_s": 9.0}))
    recs.append(Record(kind="workload", name="tiny_gpt", run_id="run-A", params={"catalog_node": "h100-sxm"},
                       fingerprint=fp_cpu, metrics={"samples_per_s": 5000.0, "time_to_target_s": 1.0}))
    # a run on the CPU of an H200 host measured the host's CPU, not the H200 node: not priced as h200-sxm
    fp_h200 = {"cpu_model": "Intel Xeon", "gpus": [{"name": "NVIDIA H200"}], "node_id": "g1"}
    recs.append(Record(kind="workload", name="tiny_gpt", run_id="run-A", fingerprint=fp_h200,
                       params={"device": "auto"}, metrics={"samples_per_s": 70.0, "device": "cpu"}))
    Store(store_path).append(recs)
    r = cli("cost", "--workload-results", "run-A", "--target", "loss=2.5", "--json")
    out = _json(r)
    assert {x["node"] for x in out["rows"]} == {"cpu-epyc-zen4-2c", "h100-sxm"}
    # Apple M2 matches no catalog entry; the CPU run on the H200 host; one curve lacks batch_size
    assert out["bad_rows"]["count"] == 3
    assert any("device kind (cpu)" in n for n in out["notes"])
    assert any("status oom" in n for n in out["notes"])
    assert any("batch_size" in n for n in out["notes"])
    # 20 * x^-0.3 + 1.5 = 2.5 at x = 20^(1/0.3) samples; the CPU row's time is that / mean samples/s
    x_true = 20 ** (1 / 0.3)
    cpu = next(x for x in out["rows"] if x["node"] == "cpu-epyc-zen4-2c")
    assert cpu["time_to_target_s"] == pytest.approx(x_true / np.mean([50, 51, 52, 51]), rel=0.02)
