"""The results store: round trip, concurrent writers, a writer killed mid-write, bad paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hwcore import store as st
from hwcore.errors import InputError
from hwcore.store import Record, Store


def _rec(i: int = 0, **kw) -> Record:
    base = dict(kind="kernel", name="gemm", params={"m": i}, metrics={"median_s": 0.001 * (i + 1)},
                units={"median_s": "s"}, run_id="r1")
    base.update(kw)
    return Record(**base)


def test_round_trip(store_path):
    s = Store(store_path)
    started = datetime(2026, 1, 1, tzinfo=UTC)
    p = s.append([_rec(0, started_at=started), _rec(1, status="oom", error="out of memory")])
    assert p is not None and p.name.startswith("part-") and p.suffix == ".parquet"
    df = st.decode(s.records())
    assert len(df) == 2
    row = df.sort_values("record_id").iloc[0]
    assert row["schema_version"] == st.SCHEMA_VERSION
    assert set(df["status"]) == {"ok", "oom"}
    assert df["params"].map(lambda p: p["m"]).tolist() == [0, 1] or set(df["params"].map(lambda p: p["m"])) == {0, 1}
    assert df["fingerprint"].iloc[0]["node_id"] == df["node_id"].iloc[0]
    q = st.query("select count(*) as n, max(json_extract(metrics, '$.median_s')::double) as m from results",
                 store=store_path)
    assert int(q["n"][0]) == 2 and q["m"][0] == pytest.approx(0.002)
    assert s.records(status="oom")["error"].iloc[0] == "out of memory"


def test_empty_store_queries_with_schema(tmp_path):
    df = Store(tmp_path / "nothing").query("select * from results")
    assert df.empty and "status" in df.columns


def test_record_validation():
    with pytest.raises(InputError, match="status"):
        _rec(status="great")
    with pytest.raises(InputError, match="kind"):
        _rec(kind="nope")
    with pytest.raises(InputError, match="name"):
        _rec(name="")


def test_filter_on_unknown_column_is_an_error(store_path):
    with pytest.raises(InputError, match="unknown column"):
        Store(store_path).records(bogus=1)


def test_bad_sql_is_an_input_error(store_path):
    Store(store_path).append(_rec())
    with pytest.raises(InputError, match="query"):
        st.query("select nope from results", store=store_path)


WRITER = textwrap.dedent(
    """
    import sys
    from hwcore.store import Record, Store
    s = Store(sys.argv[1]); who = int(sys.argv[2])
    for i in range(int(sys.argv[3])):
        s.append(Record(kind="kernel", name="w", params={"who": who, "i": i}, run_id=f"w{who}",
                        fingerprint={"node_id": "test"}))
    """
)


def test_concurrent_writers_lose_nothing(store_path):
    n_proc, n_rec = 4, 200
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store_path), str(w), str(n_rec)])
        for w in range(n_proc)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0
    df = st.query(
        "select json_extract(params, '$.who')::int as who, json_extract(params, '$.i')::int as i from results",
        store=store_path,
    )
    assert len(df) == n_proc * n_rec
    assert len(df.drop_duplicates()) == n_proc * n_rec
    assert sorted(df.groupby("who").size().tolist()) == [n_rec] * n_proc


KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    import pyarrow.parquet as pq
    from hwcore.store import Record, Store
    s = Store(sys.argv[1])
    s.append(Record(kind="kernel", name="before", fingerprint={"node_id": "t"}))
    real = pq.write_table
    def slow_write(table, where, **kw):
        # write part of the file, then hang: the parent kills us mid-write
        where.write(b"PAR1" + b"x" * 4096)
        where.flush()
        print("writing", flush=True)
        time.sleep(600)
    pq.write_table = slow_write
    s.append([Record(kind="kernel", name="during", fingerprint={"node_id": "t"})] * 1)
    """
)


def test_writer_killed_mid_write_leaves_store_readable(store_path):
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(store_path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    leftovers = [f.name for f in Path(store_path).iterdir()]
    assert any(n.endswith(".tmp") for n in leftovers)  # the half file exists, hidden
    df = Store(store_path).records()
    assert df["name"].tolist() == ["before"]
    # and the store still takes new records
    Store(store_path).append(_rec())
    assert len(Store(store_path).records()) == 2


def test_unwritable_and_bad_paths(tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        Store(f).append(_rec())
    with pytest.raises(InputError, match="not a directory"):
        Store(f / "sub").check_writable()
    with pytest.raises(InputError, match="store"):
        Store("/proc/hweval-no-such/store").append(_rec())
    assert not Path("/proc/hweval-no-such").exists()
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running with permissions that ignore mode bits")
        with pytest.raises(InputError, match="not writable"):
            Store(ro / "store").append(_rec())
        assert not (ro / "store").exists()
    finally:
        ro.chmod(0o700)


def test_default_path_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("HWEVAL_STORE", str(tmp_path / "s"))
    assert st.default_path() == tmp_path / "s"


def test_cli_results_list_filter_export(store_path, cli, tmp_path):
    s = Store(store_path)
    s.append([_rec(0), _rec(1, status="failed", error="boom", name="stream")])
    r = cli("results", "--store", str(store_path))
    assert r.returncode == 0, r.stderr
    assert "gemm" in r.stdout and "stream" in r.stdout
    r = cli("results", "--status", "failed", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["name"] for x in rows] == ["stream"]
    out = tmp_path / "x.csv"
    r = cli("results", "--csv", str(out))
    assert r.returncode == 0 and out.read_text().count("\n") == 3
    r = cli("results", "--sql", "select name from results where status='ok'", "--json")
    assert json.loads(r.stdout) == [{"name": "gemm"}]


def test_cli_bad_input_exit_2(cli, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    for args in (["results", "--store", str(f)], ["results", "--status", "great"], ["results", "--nope"],
                 ["nosuchcommand"], ["results", "--sql", "select bogus from results"]):
        r = cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "error" in lines[0], r.stderr


def test_cli_info(cli):
    r = cli("info", "--json")
    assert r.returncode == 0, r.stderr
    fp = json.loads(r.stdout)
    assert fp["node_id"] and fp["cpu_model"]
    r = cli("info")
    assert "node_id" in r.stdout
