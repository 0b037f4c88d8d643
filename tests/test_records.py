"""Typed records: each kind's builder and reader round-trip through a real store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from hwcore import records
from hwcore.records import CellRecord, FitRecord, KernelRecord, ReportRecord, WorkloadRecord
from hwcore.store import Store

FP = {"node_id": "n1", "hostname": "h"}
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize("rec", [
    KernelRecord(kernel="gemm", kind="kernel", device="cpu", params={"m": 8, "dtype": "fp32"},
                 metrics={"median_s": 1e-3, "flops_per_s": 2e9}, units={"median_s": "s"}, fingerprint=FP,
                 started_at=T0, finished_at=T0),
    KernelRecord(kernel="all_reduce", kind="collective", device="cpu", params={"ranks": 2}, metrics={"busbw_Bps": 1e9},
                 fingerprint=FP, status="failed", error="boom"),
    WorkloadRecord(workload="mlp_regressor", params={"batch_size": 32}, metrics={"samples_per_s": 1234.5},
                   units={"samples_per_s": "1/s"}, fingerprint=FP, plan="quick", run_id="r1"),
    CellRecord(cell_id="c1", notebook_name="01_node", node="cpu", parameters={"a": [1, 2]}, output="/x.ipynb",
               wall_s=3.5, timeout_s=60.0, status="timeout", error="cell timed out", fingerprint=FP, plan="p"),
    CellRecord(cell_id="c2", notebook_name="02", node="h100-sxm", slurm_job="12_3", slurm_state="PREEMPTED",
               timeout_s=60.0, status="preempted", fingerprint=FP),
    FitRecord(fit="scaling", summary="Amdahl p=0.9", values={"p": 0.9}, inputs={"model": "amdahl"}, fingerprint=FP),
    ReportRecord(path="/r.html", recommendation="buy", charts=("cost",), rows=3, candidates=("a", "b"), plan="q",
                 fingerprint=FP),
])
def test_round_trip(tmp_path, rec):
    st = Store(tmp_path)
    st.append(rec.to_record())
    back = records.read(st, type(rec))
    assert len(back) == 1
    got = back[0]
    # the store fills a missing run id and takes the node id from the fingerprint
    assert got.run_id and (rec.run_id in ("", got.run_id))
    assert got.node_id == (rec.node_id or FP["node_id"])
    expect = replace(rec, run_id=got.run_id, node_id=got.node_id)
    if rec.finished_at is None:  # stamped at write time
        assert got.finished_at is not None
        expect = replace(expect, started_at=got.started_at, finished_at=got.finished_at)
    assert got == expect  # every other field, including record_id and the fingerprint


def test_read_filters_and_orders(tmp_path):
    st = Store(tmp_path)
    for i, status in enumerate(["ok", "failed", "ok"]):
        st.append(WorkloadRecord(workload="w", params={"i": i}, status=status, fingerprint=FP, plan="a",
                                 finished_at=datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC)).to_record())
    st.append(WorkloadRecord(workload="w", params={"i": 9}, fingerprint=FP, plan="b").to_record())
    ok = records.read(st, WorkloadRecord, plan="a", status="ok")
    assert [r.params["i"] for r in ok] == [0, 2]
    assert records.read(st, CellRecord) == []


def test_metric_is_none_for_non_numbers():
    r = WorkloadRecord(workload="w", metrics={"a": 1, "b": "x", "c": float("nan"), "d": True})
    assert r.metric("a") == 1.0 and r.metric("b") is None and r.metric("c") is None and r.metric("d") is None
    assert r.metric("missing") is None


def test_from_row_unknown_kind():
    with pytest.raises(KeyError, match="no typed record"):
        records.from_row({"kind": "nope", "name": "x"})
