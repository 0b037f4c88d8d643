"""benchmarks/memory_validation.py: the memory model scored against published peak memory (no fitting)."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import memory_validation as M  # noqa: E402
from hwmodels.predict.memory import FIXED_BUFFER_BYTES, FRAGMENTATION, MemoryEstimate  # noqa: E402
from hwmodels.predict.spec import preset  # noqa: E402

G = 2.0**30


def _mem() -> MemoryEstimate:
    body = 10 * G + 10 * G + 20 * G + 30 * G
    return MemoryEstimate(weights=10 * G, grads=10 * G, optimizer=20 * G, activations=30 * G,
                          buffers=FIXED_BUFFER_BYTES + FRAGMENTATION * body, capacity=80 * G)


def test_the_statistic_decides_what_is_compared():
    m = _mem()
    assert M.comparable_bytes(m, "max_allocated") == pytest.approx(70 * G)  # tensors only
    assert M.comparable_bytes(m, "max_reserved") == pytest.approx(70 * G * (1 + FRAGMENTATION))  # + fragmentation
    assert M.comparable_bytes(m, "nvidia-smi") == pytest.approx(m.total)  # + context and NCCL buffers


ROW = {"run_id": "r", "hardware": "h100-sxm", "accelerators": "8", "model": "llama3-8b", "seq_len": "8192",
       "global_batch": "16", "micro_batch": "2", "precision": "bf16", "dp": "8", "tp": "1", "pp": "1", "cp": "1",
       "interleave": "1", "sharding": "full_shard", "activation_checkpointing": "full", "sequence_parallel": "false",
       "peak_memory_GiB": "40", "memory_statistic": "max_reserved", "framework": "torchtitan", "source": "s",
       "source_detail": "", "year": "2025"}


def test_layout_is_the_stated_one_and_inconsistent_rows_are_refused():
    spec = preset("llama3-8b")
    lay, how = M.layout_of(ROW, spec)
    assert (lay.dp, lay.tp, lay.pp, lay.micro_batch, lay.sharding, lay.recompute) == (8, 1, 1, 2, "full_shard",
                                                                                       "full")
    with pytest.raises(ValueError, match="accelerators"):
        M.layout_of({**ROW, "dp": "4"}, spec)
    with pytest.raises(ValueError, match="sharding"):
        M.layout_of({**ROW, "sharding": "fsdp"}, spec)
    with pytest.raises(ValueError, match="micro_batch"):
        M.layout_of({**ROW, "micro_batch": ""}, spec)
    # torchtitan's op-level SAC is priced as the time validation prices it
    lay, how = M.layout_of({**ROW, "activation_checkpointing": "selective"}, spec)
    assert lay.recompute == "full" and 0 < lay.recompute_layers < 1 and "SAC" in how
    # a framework whose 'selective' has no stated memory meaning is refused, not guessed
    with pytest.raises(ValueError, match="selective"):
        M.layout_of({**ROW, "activation_checkpointing": "selective", "framework": "fms-fsdp"}, spec)
    with pytest.raises(ValueError, match="selective"):  # torchtitan's layer-level SAC is not the op-level one
        M.layout_of({**ROW, "activation_checkpointing": "selective", "source_detail": "layer-level SAC"}, spec)


def test_quantiles_are_symmetric_in_log_space():
    q = M.quant([0.25, -0.2, 0.0])
    assert q["n"] == 3 and q["max"] == pytest.approx(0.25) and q["median"] == pytest.approx(0.25)
    assert q["median_signed"] == pytest.approx(0.0)


def test_end_to_end_writes_the_error_file(tmp_path, monkeypatch):
    runs = tmp_path / "runs.csv"
    rows = [ROW, {**ROW, "run_id": "bad-hw", "hardware": "nope"}, {**ROW, "run_id": "r2", "micro_batch": "1"}]
    with open(runs, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROW), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "mem.json"
    monkeypatch.setattr(M, "RUNS", runs)
    monkeypatch.setattr(M, "OUT", out)
    monkeypatch.setattr(M, "ROOT", tmp_path)
    assert M.main(["--quiet"]) == 0
    d = json.loads(out.read_text())
    assert d["overall"]["n"] == 2 and d["level"] == 0.9 and d["band_rel"] == d["overall"]["q90"]
    assert any("bad-hw" in s for s in d["skipped"])
    r = {x["run_id"]: x for x in d["rows"]}
    assert r["r2"]["predicted_GiB"] < r["r"]["predicted_GiB"]  # half the micro-batch, fewer activations
    assert math.isclose(r["r"]["error"], r["r"]["predicted_GiB"] / 40 - 1, rel_tol=1e-3)


def test_committed_rows_are_sourced_and_the_committed_error_is_current():
    """Every published row names its source and statistic; the committed memory_error.json is what the committed
    rows and memory model give now (the predictor's memory interval reads it)."""
    from hwmodels.catalog import default_catalog

    with open(M.RUNS, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 15 and len({r["run_id"] for r in rows}) == len(rows)
    cat = default_catalog()
    for r in rows:
        assert r["source"].strip() and r["source_detail"].strip(), r["run_id"]
        assert r["hardware"] in cat and r["memory_statistic"] in M.STATISTICS, r["run_id"]
        assert float(r["peak_memory_GiB"]) > 0
    preds, skipped = M.predict(rows, cat)
    assert len(preds) + len(skipped) == len(rows)
    committed = json.loads(M.OUT.read_text())
    now = M.quant([p["err"] for p in preds])
    assert committed["overall"]["n"] == now["n"]
    assert committed["band_rel"] == pytest.approx(now["q90"], rel=1e-6)


def test_the_fit_verdict_is_scored_both_ways_on_published_outcomes():
    """memory_validation.boundary: runs reported out of memory beside runs that ran; the point verdict and the
    memory-safe rule (the q90 error as headroom) against the outcome."""
    from hwmodels.catalog import default_catalog

    small = {**ROW, "run_id": "small", "outcome": "ran", "micro_batch": "1", "global_batch": "8"}
    big = {**ROW, "run_id": "big", "outcome": "oom", "micro_batch": "16", "global_batch": "128",
           "activation_checkpointing": "none"}
    mid = {**ROW, "run_id": "mid", "outcome": "oom", "micro_batch": "1", "global_batch": "8"}  # a model miss
    bad = {**ROW, "run_id": "bad", "outcome": "crashed"}
    res, skipped = M.boundary([small, big, mid, bad], default_catalog(), margin=0.5)
    assert skipped == ["bad: outcome 'crashed' not one of ran, oom"]
    r = {b["run_id"]: b for b in res["rows"]}
    assert r["big"]["ratio"] > 1 and r["small"]["ratio"] < 1 / 1.5  # no recompute at 16 x 8k tokens: far over
    assert r["mid"]["ratio"] == r["small"]["ratio"]
    assert (res["n"], res["oom"], res["ran"]) == (3, 2, 1)
    # the point verdict: 'big' caught, 'mid' missed (said to fit), 'small' kept
    assert res["point_verdict"] == {"oom_said_fits": 1, "oom_said_not": 1, "ran_said_fits": 1, "ran_said_not": 0}
    # with +50% headroom 'small' (and so 'mid') still fits: the rule cannot see that miss either
    assert res["memory_safe_verdict"]["oom_said_fits"] == 1 and res["memory_safe_margin"] == 0.5
    # with a headroom that 'small' does not keep, both 'mid' and 'small' are flagged
    tight, _ = M.boundary([small, mid], default_catalog(), margin=1 / r["small"]["ratio"])
    assert tight["memory_safe_verdict"] == {"oom_said_fits": 0, "oom_said_not": 1, "ran_said_fits": 0,
                                            "ran_said_not": 1}
    assert "memory_safe_verdict" not in M.boundary([small], default_catalog(), margin=None)[0]


def test_committed_boundary_rows_are_sourced_and_their_score_is_current():
    """memory_boundary.csv: every row names its source and an outcome; the committed memory_error.json holds what
    the rows and the memory model give now."""
    from hwmodels.catalog import default_catalog

    with open(M.BOUNDARY, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len({r["run_id"] for r in rows}) == len(rows)
    assert sum(r["outcome"] == "oom" for r in rows) >= 10 and sum(r["outcome"] == "ran" for r in rows) >= 10
    cat = default_catalog()
    for r in rows:
        assert r["source"].strip() and r["source_detail"].strip() and r["hardware"] in cat, r["run_id"]
        assert r["outcome"] in M.OUTCOMES, r["run_id"]
    committed = json.loads(M.OUT.read_text())
    now, skipped = M.boundary(rows, cat, committed["band_rel"])
    b = committed["boundary"]
    assert (b["n"], b["oom"], b["ran"]) == (now["n"], now["oom"], now["ran"]) and b["skipped"] == skipped
    assert b["point_verdict"] == now["point_verdict"] and b["memory_safe_verdict"] == now["memory_safe_verdict"]
    assert [x["ratio"] for x in b["rows"]] == [x["ratio"] for x in now["rows"]]
