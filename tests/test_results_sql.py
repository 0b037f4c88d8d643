"""``hweval results --sql`` is read-only and sees only the store's view ``results``.

A refused statement is one line naming what was refused, exit 2, and the store
(and the rest of the disk) is byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hwcore.errors import InputError
from hwcore.store import Record, Store

FP = {"node_id": "t"}


@pytest.fixture
def filled(store_path):
    s = Store(store_path)
    for i in range(4):
        s.append(Record(kind="kernel", name=f"k{i}", metrics={"median_s": 0.001 * (i + 1)}, fingerprint=FP))
    Store(store_path).records()  # warm the part cache, so what follows must write nothing
    return store_path


def _digests(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _hostile(store: Path, tmp_path: Path) -> list[tuple[str, str]]:
    part = sorted(store.glob("part-*.parquet"))[0]
    return [
        ("select * from read_csv('/etc/passwd')", "/etc/passwd"),
        ("select * from read_text('/etc/hostname')", "/etc/hostname"),
        (f"copy results to '{tmp_path / 'out.csv'}'", "COPY"),
        (f"copy (select * from results limit 3) to '{part}' (format parquet)", "COPY"),
        (f"copy (select 1) to '{part}' (format parquet, use_tmp_file false)", "COPY"),
        (f"attach '{tmp_path / 'x.duckdb'}' as x", "ATTACH"),
        ("install httpfs", "INSTALL"),
        ("load httpfs", "LOAD"),
        ("set enable_external_access = true", "SET"),
        ("reset lock_configuration", "RESET"),
        ("pragma enable_profiling", "PRAGMA"),
        (f"export database '{tmp_path / 'dump'}'", "EXPORT"),
        ("create table t as select * from results", "CREATE"),
        ("select 1; copy results to 'x.csv'", "one SELECT statement"),
        (f"select * from read_parquet('{tmp_path / 'elsewhere.parquet'}')", "elsewhere.parquet"),
    ]


def test_api_refuses_everything_but_select(filled, tmp_path):
    s = Store(filled)
    before = _digests(filled)
    for sql, named in _hostile(filled, tmp_path):
        with pytest.raises(InputError, match="query") as ei:
            s.query(sql)
        msg = str(ei.value)
        assert named in msg and "\n" not in msg, (sql, msg)
    assert _digests(filled) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written anywhere
    # what is allowed still works: json, aggregates, summarize, explain
    q = s.query("select count(*) n, max(json_extract(metrics, '$.median_s')::double) m from results")
    assert int(q["n"][0]) == 4 and q["m"][0] == pytest.approx(0.004)
    assert len(s.query("summarize results")) > 0
    assert len(s.query("explain select * from results")) > 0
    assert s.query("select current_setting('enable_external_access') v")["v"][0] in (False, "false")


@pytest.mark.parametrize("sql_key", ["read_csv", "copy_to", "copy_over_part", "attach", "install", "set"])
def test_cli_sql_refusals_one_line_exit_2_nothing_written(filled, cli, tmp_path, sql_key):
    part = sorted(filled.glob("part-*.parquet"))[0]
    sql, named = {
        "read_csv": ("select * from read_csv('/etc/passwd')", "/etc/passwd"),
        "copy_to": (f"copy results to '{tmp_path / 'stolen.csv'}'", "COPY"),
        "copy_over_part": (f"copy (select * from results limit 3) to '{part}' (format parquet)", "COPY"),
        "attach": (f"attach '{tmp_path / 'x.duckdb'}' as x", "ATTACH"),
        "install": ("install httpfs", "INSTALL"),
        "set": ("set enable_external_access = true", "SET"),
    }[sql_key]
    before = _digests(filled)
    out = tmp_path / "o"
    out.mkdir()
    r = cli("results", "--store", str(filled), "--sql", sql, cwd=out)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
    assert _digests(filled) == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["o"]
    # and the store still answers
    r = cli("results", "--store", str(filled), "--sql", "select count(*) as n from results", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == [{"n": 4}], r.stderr
    assert _digests(filled) == before


def test_default_view_sets_aside_a_killed_attempt_and_says_so(store_path, cli):
    """A cell killed after writing a row, then resumed: the default listing shows the resumed attempt's row
    once and says one row was set aside; --all-attempts and --sql see every row."""
    from hwcore.records import CellRecord

    s = Store(store_path)
    s.append(Record(kind="kernel", name="gemm", params={"n": 8}, metrics={"median_s": 2.0}, run_id="20261201T000000-a",
                    plan="p", cell_id="c1", fingerprint=FP))  # the killed attempt: no notebook record
    s.append(Record(kind="kernel", name="gemm", params={"n": 8}, metrics={"median_s": 1.0}, run_id="20261201T010000-b",
                    plan="p", cell_id="c1", fingerprint=FP))
    s.append(CellRecord(cell_id="c1", notebook_name="nb", node="cpu", run_id="20261201T010000-b", plan="p",
                        fingerprint=FP).to_record())
    r = cli("results", "--store", str(store_path), "--kind", "kernel", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [json.loads(x["metrics"])["median_s"] for x in rows] == [1.0]
    assert "1 row(s) of plan-cell attempts that do not count" in r.stderr and "--all-attempts" in r.stderr
    r = cli("results", "--store", str(store_path), "--kind", "kernel", "--json", "--all-attempts")
    assert len(json.loads(r.stdout)) == 2 and "set aside" not in r.stderr
    r = cli("results", "--store", str(store_path), "--json", "--sql",
            "select cell_id, run_id from results where kind = 'kernel' order by run_id")
    assert [x["run_id"][-1] for x in json.loads(r.stdout)] == ["a", "b"]
