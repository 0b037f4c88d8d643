"""Schema and sanity checks of the published reference data (data/reference, data/calibration)."""

from __future__ import annotations

import csv
import re
import tomllib
from pathlib import Path

import pytest

from hwmodels.dtypes import PREDICT_PRECISIONS
from hwmodels.predict.power import compute_factor

REPO = Path(__file__).resolve().parent.parent
RUNS = REPO / "data" / "reference" / "training_runs.csv"
RUNS_README = REPO / "data" / "reference" / "README.md"
CAL = REPO / "data" / "calibration" / "published.csv"
CAL_README = REPO / "data" / "calibration" / "README.md"

RUN_COLUMNS = ["run_id", "hardware", "accelerators", "model", "params_B", "seq_len", "global_batch", "micro_batch",
               "precision", "dp", "tp", "pp", "cp", "interleave", "sharding", "activation_checkpointing",
               "offload_layers", "sequence_parallel", "tp_comm_overlap", "inter_node_Gbps", "accelerators_per_node",
               "power_limit_W", "framework", "tokens_per_s_per_accelerator", "tflops_per_accelerator", "mfu", "hfu",
               "source", "source_detail", "year"]
CAL_COLUMNS = ["node_id", "quantity", "value", "unit", "condition", "framework", "source", "source_detail", "as_of"]
CAL_UNITS = {"matmul_tflops": "TFLOP/s", "memory_bw_GBps": "GB/s", "busbw_GBps": "GB/s",
             "launch_overhead_us": "us", "attention_tflops": "TFLOP/s", "host_copy_GBps": "GB/s"}
SPEC_KEYS = ["d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_dim", "glu", "vocab"]
OPTIONAL_SPEC_KEYS = {"head_dim", "tied_embeddings", "learned_positions"}


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _known_ids(readme: Path) -> set[str]:
    ids = {tomllib.loads(p.read_text())["id"] for p in (REPO / "data" / "catalog").glob("*.toml")}
    m = re.search(r"^Pending catalog ids[^\n]*\n([^\n]+)", readme.read_text(), re.M)
    if m:
        ids |= {s.strip() for s in m.group(1).split(",") if s.strip() and not s.strip().startswith("(")}
    return ids


@pytest.fixture(scope="module")
def runs() -> list[dict[str, str]]:
    cols, rows = _read(RUNS)
    assert cols == RUN_COLUMNS
    return rows


def _num(row: dict[str, str], col: str) -> float | None:
    v = row[col].strip()
    if v == "":
        return None
    x = float(v)
    assert x > 0, (row["run_id"], col, v)
    return x


def test_training_runs_schema_and_values(runs):
    known = _known_ids(RUNS_README)
    ids = [r["run_id"] for r in runs]
    assert len(ids) == len(set(ids)), "duplicate run_id"
    for r in runs:
        rid = r["run_id"]
        assert r["hardware"] in known, (rid, r["hardware"])
        assert r["source"].strip() and r["source_detail"].strip(), rid
        assert 2019 <= int(r["year"]) <= 2026, rid
        n = _num(r, "accelerators")
        assert n is not None and n == int(n), rid
        assert _num(r, "params_B") is not None, rid
        assert _num(r, "seq_len") is not None, rid
        for col in ("global_batch", "micro_batch", "dp", "tp", "pp", "cp", "interleave", "year"):
            _num(r, col)
        off = r["offload_layers"]
        assert off == "" or (off.isdigit() and int(off) > 0), (rid, "offload_layers: empty or a positive integer")
        assert r["precision"] in PREDICT_PRECISIONS, rid
        assert r["sharding"] in {"", "none", "ddp", "zero1", "shard_grad_op", "full_shard"}, rid
        assert r["activation_checkpointing"] in {"", "none", "selective", "full"}, rid
        assert r["sequence_parallel"] in {"", "true", "false"}, rid
        assert r["tp_comm_overlap"] in {"", "true", "false"}, rid
        _num(r, "inter_node_Gbps")  # empty, or a positive per-node figure
        apn = r["accelerators_per_node"]  # empty (the catalog's node), or a smaller board of the type
        assert apn == "" or (apn.isdigit() and 1 <= int(apn) < 8), (rid, "accelerators_per_node")
        # empty (not stated), or the per-accelerator power limit the source states, at most the catalog's TDP, and
        # within the published clock curve (hwmodels.predict.power) where it is below it
        pl = None
        if r["power_limit_W"] == "unstated":  # power limited by the source's words, the figure not given
            assert "power limited" in r["source_detail"] and "not stated" in r["source_detail"], rid
        else:
            pl = _num(r, "power_limit_W")
        if pl is not None:
            tdp = tomllib.loads((REPO / "data" / "catalog" / f"{r['hardware']}.toml").read_text())["power"]["tdp_watts"]
            assert pl <= tdp and (pl == tdp or compute_factor(r["hardware"], tdp, pl).value < 1), (rid, pl, tdp)
            assert f"{pl:g}W" in r["source_detail"].replace(" W", "W"), (rid, "power_limit_W: quoted in source_detail")
        figures = [_num(r, c) for c in ("tokens_per_s_per_accelerator", "tflops_per_accelerator", "mfu", "hfu")]
        assert any(f is not None for f in figures), f"{rid}: no measured figure"
        for c in ("mfu", "hfu"):
            v = _num(r, c)
            assert v is None or v < 1, (rid, c)
        par = [_num(r, c) for c in ("dp", "tp", "pp")]
        if all(p is not None for p in par):
            assert par[0] * par[1] * par[2] * (_num(r, "cp") or 1) == n, f"{rid}: dp*tp*pp*cp != accelerators"
        if "=" in r["model"]:
            kv = dict(item.split("=", 1) for item in r["model"].split(","))
            assert list(kv)[:len(SPEC_KEYS)] == SPEC_KEYS and set(kv) - set(SPEC_KEYS) <= OPTIONAL_SPEC_KEYS, rid
            assert kv["glu"] in {"true", "false"}, rid
            bools = {"glu", "tied_embeddings", "learned_positions"}
            assert all(kv[k] in {"true", "false"} for k in bools & set(kv)), rid
            assert all(int(v) > 0 for k, v in kv.items() if k not in bools), rid
            assert int(kv["n_heads"]) % int(kv["n_kv_heads"]) == 0, rid


def test_training_runs_coverage(runs):
    assert len(runs) >= 40
    hw = {r["hardware"] for r in runs}
    assert len(hw) >= 3, hw
    sizes = [float(r["params_B"]) for r in runs]
    assert min(sizes) <= 1.5 and max(sizes) >= 175
    layouts = {("tp_pp" if (int(r["tp"] or 1) > 1 or int(r["pp"] or 1) > 1) else "dp") for r in runs}
    assert layouts == {"tp_pp", "dp"}


def test_published_calibration_schema():
    if not CAL.exists():
        pytest.skip("data/calibration/published.csv not written yet")
    cols, rows = _read(CAL)
    assert cols == CAL_COLUMNS
    known = _known_ids(CAL_README)
    for i, r in enumerate(rows, start=2):
        assert r["node_id"] in known, (i, r["node_id"])
        assert r["quantity"] in CAL_UNITS, (i, r["quantity"])
        assert r["unit"] == CAL_UNITS[r["quantity"]], (i, r["unit"])
        assert float(r["value"]) > 0, i
        assert r["source"].strip() and r["source_detail"].strip() and r["as_of"].strip(), i
        cond = dict(kv.split("=", 1) for kv in r["condition"].split(";") if kv)
        if r["quantity"] in ("matmul_tflops", "attention_tflops"):
            assert "dtype" in cond, i
        if r["quantity"] == "busbw_GBps":
            assert {"collective", "ranks", "level", "size_bytes"} <= set(cond), i
            assert cond["level"] in {"intra", "inter"}, i
        if r["quantity"] == "host_copy_GBps":
            assert cond.get("direction") in {"d2h", "h2d"} and cond.get("concurrent") in {"all", "one"}, i


def test_every_training_hardware_has_a_published_matmul_rate(runs):
    if not CAL.exists():
        pytest.skip("data/calibration/published.csv not written yet")
    _, rows = _read(CAL)
    have = {r["node_id"] for r in rows if r["quantity"] == "matmul_tflops"}
    # a node on the same die as one with a figure takes it (catalog [die] same_as; calibration, same-die figures)
    from hwmodels.catalog import default_catalog

    have |= {n.id for n in default_catalog() if n.same_die_as in have}
    m = re.search(r"^Missing matmul figures: ([^\n]*)$", CAL_README.read_text(), re.M)
    declared = {s.strip() for s in m.group(1).split(",")} if m else set()
    missing = {r["hardware"] for r in runs} - have
    assert missing == declared, f"undeclared gaps {missing - declared}, stale declarations {declared - missing}"


def test_megatron_bridge_rows_carry_their_recipe_audit(runs):
    """Every Megatron-Bridge row whose table layout matches its release's performance preset
    (data/reference/mbridge_recipe_audit.csv) states the preset's sharding, recompute, offload, TP overlap and
    sequence parallelism; a row whose table contradicts the preset says so and leaves those fields to the search
    unless the table itself stated them."""
    audit_path = REPO / "data" / "reference" / "mbridge_recipe_audit.csv"
    _, audit = _read(audit_path)
    by_id = {r["run_id"]: r for r in runs}
    assert {a["run_id"] for a in audit} == {i for i in by_id if i.startswith("mbridge")}
    for a in audit:
        r = by_id[a["run_id"]]
        if a["table_agrees"] == "no":
            assert "the table's layout does not match the release's performance preset" in r["source_detail"], a["run_id"]
            continue
        assert a["table_agrees"] == "yes", a["run_id"]
        want = "full_shard" if a["megatron_fsdp"].lower() == "true" else "zero1"
        assert r["sharding"] in (want, "ddp" if want == "zero1" else want), a["run_id"]
        assert r["activation_checkpointing"] == a["recompute"], a["run_id"]
        assert (r["offload_layers"] or "0") == a["cpu_offload_layers"], a["run_id"]
        assert r["tp_comm_overlap"] == a["tp_comm_overlap"].lower(), a["run_id"]
        assert r["sequence_parallel"] == a["sequence_parallel"].lower(), a["run_id"]
