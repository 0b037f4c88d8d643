"""A damaged store part costs only itself: quarantined with a reason, every query goes on with the rest.

Cases: truncated, zero-length, random bytes, foreign schema, damaged past the
footer (found by the full read after a failed query); stale hidden ``.tmp``
files are cleaned, fresh ones kept; ``hweval store check`` changes nothing
(exit 1), ``repair`` quarantines; ``hweval results`` (also ``--sql``) and
``hweval run --dry-run`` go on; no committed row is lost or changed.
"""

from __future__ import annotations

import hashlib
import os
import textwrap
import time
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hwcore import store as st
from hwcore.store import QUARANTINE_DIR, Record, Store, StoreWarning, validate_part

FP = {"node_id": "t"}


def _fill(path: Path, n: int = 4) -> list[Path]:
    s = Store(path)
    return [s.append([Record(kind="kernel", name=f"k{i}", params={"i": i, "pad": "x" * 64, "j": j},
                             fingerprint=FP) for j in range(20)]) for i in range(n)]


def _truncate(p: Path) -> None:
    b = p.read_bytes()
    p.write_bytes(b[: len(b) // 2])


def _zero(p: Path) -> None:
    p.write_bytes(b"")


def _random(p: Path) -> None:
    p.write_bytes(os.urandom(3000))


def _foreign(p: Path) -> None:
    pq.write_table(pa.table({"x": [1, 2], "name": ["a", "b"]}), p)


def _wrong_type(p: Path) -> None:
    t = pq.read_table(p)
    i = t.schema.get_field_index("schema_version")
    pq.write_table(t.set_column(i, "schema_version", pa.array(["1"] * len(t))), p)


def _data_pages(p: Path) -> None:
    """Flip the bytes of one column chunk, keeping the footer: only a full read notices."""
    c = pq.read_metadata(p).row_group(0).column(1)
    b = bytearray(p.read_bytes())
    for j in range(c.data_page_offset + 16, c.data_page_offset + c.total_compressed_size - 2):
        b[j] ^= 0xFF
    p.write_bytes(bytes(b))


DAMAGE = {
    "truncated": (_truncate, "truncated"),
    "zero-length": (_zero, "zero-length"),
    "random bytes": (_random, "not a Parquet file"),
    "foreign schema": (_foreign, "foreign schema"),
    "wrong column type": (_wrong_type, "foreign schema: column schema_version"),
}


def _digests(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_part_is_quarantined_and_queries_go_on(store_path, case):
    damage, reason = DAMAGE[case]
    parts = _fill(store_path)
    before = _digests(store_path)
    bad = parts[1]
    damage(bad)
    assert reason in (validate_part(bad) or "")
    with pytest.warns(StoreWarning, match=rf"{bad.name}.*{reason}"):
        df = Store(store_path).records()
    # every row of the other parts, unchanged
    assert sorted(set(df["name"])) == ["k0", "k2", "k3"] and len(df) == 60
    moved = store_path / QUARANTINE_DIR / bad.name
    assert moved.exists() and not bad.exists()
    note = (store_path / QUARANTINE_DIR / f"{bad.name}.reason.txt").read_text()
    assert reason in note and bad.name in note
    after = _digests(store_path)
    for p in parts:
        if p != bad:
            assert after[p.name] == before[p.name]  # committed parts: same bytes
    # the next query is quiet, and the store takes new records
    with warnings.catch_warnings():
        warnings.simplefilter("error", StoreWarning)
        assert len(Store(store_path).records()) == 60
    Store(store_path).append(Record(kind="kernel", name="new", fingerprint=FP))
    assert len(st.query("select * from results", store=store_path)) == 61


def test_damage_past_the_footer_found_by_full_read(store_path):
    parts = _fill(store_path)
    _data_pages(parts[2])
    assert validate_part(parts[2]) is None  # the cheap check cannot see it
    assert "damaged data" in validate_part(parts[2], deep=True)
    with pytest.warns(StoreWarning, match=parts[2].name):
        df = Store(store_path).records()
    assert sorted(set(df["name"])) == ["k0", "k1", "k3"]
    assert (store_path / QUARANTINE_DIR / parts[2].name).exists()


def test_check_changes_nothing_repair_quarantines(store_path, cli):
    parts = _fill(store_path)
    _zero(parts[0])
    _foreign(parts[3])
    stale = store_path / ".part-x-killed.parquet.tmp"
    stale.write_bytes(b"PAR1half")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    fresh = store_path / ".part-y-writing.parquet.tmp"
    fresh.write_bytes(b"PAR1")
    before = _digests(store_path)

    r = cli("store", "check", "--store", str(store_path))
    assert r.returncode == 1, r.stderr
    assert f"damaged  {parts[0].name}: zero-length" in r.stdout and "foreign schema" in r.stdout
    assert f"stale    {stale.name}" in r.stdout and fresh.name in r.stdout
    assert _digests(store_path) == before  # check wrote nothing, moved nothing
    assert not (store_path / QUARANTINE_DIR).exists()

    r = cli("store", "repair", "--store", str(store_path))
    assert r.returncode == 0, r.stderr
    assert "2 damaged (quarantined)" in r.stdout and "1 stale tmp removed" in r.stdout
    assert not stale.exists() and fresh.exists()  # a recent .tmp may belong to a live writer
    assert sorted(p.name for p in (store_path / QUARANTINE_DIR).glob("*.parquet")) == sorted(
        [parts[0].name, parts[3].name])
    r = cli("store", "check", "--store", str(store_path))
    assert r.returncode == 0 and "2 part(s) ok, 0 damaged" in r.stdout and "2 in quarantine" in r.stdout
    # a shorter grace period makes the remaining .tmp stale
    r = cli("store", "check", "--store", str(store_path), "--tmp-grace-s", "0")
    assert r.returncode == 1 and fresh.name in r.stdout
    # bad input: one line, exit 2
    r = cli("store", "check", "--store", str(store_path), "--tmp-grace-s", "-1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_stale_tmp_cleaned_by_writer_fresh_kept(store_path, monkeypatch):
    _fill(store_path, 1)
    stale = store_path / ".part-old.parquet.tmp"
    fresh = store_path / ".part-new.parquet.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"x")
    old = time.time() - 120
    os.utime(stale, (old, old))
    monkeypatch.setenv(st.TMP_GRACE_ENV, "60")
    Store(store_path).append(Record(kind="kernel", name="w", fingerprint=FP))
    assert not stale.exists() and fresh.exists()
    monkeypatch.setenv(st.TMP_GRACE_ENV, "soon")
    with pytest.raises(st.InputError, match=st.TMP_GRACE_ENV):
        Store(store_path).clean_tmp()


def test_cli_queries_go_on_past_damage(store_path, cli, tmp_path):
    parts = _fill(store_path)
    _truncate(parts[0])
    r = cli("results", "--store", str(store_path), "--json")
    assert r.returncode == 0, r.stderr
    assert "quarantined" in r.stderr and parts[0].name in r.stderr
    _random(parts[1])
    r = cli("results", "--store", str(store_path), "--sql", "select count(*) as n from results", "--json")
    assert r.returncode == 0 and '"n":40' in r.stdout.replace(" ", ""), r.stderr
    _zero(parts[2])
    nb = tmp_path / "nb"
    nb.mkdir()
    (nb / "one.py").write_text(textwrap.dedent('''\
        # %% tags=["parameters"]
        n: int = 1  # a number

        # %%
        print(n)
        '''))
    plan = tmp_path / "p.yaml"
    plan.write_text("name: p\nnotebooks_dir: nb\nnodes: [cpu-epyc-zen4-2c]\nmatrix:\n  - notebook: one\n")
    r = cli("run", "--plan", str(plan), "--store", str(store_path), "--out", str(tmp_path / "out"), "--dry-run")
    assert r.returncode == 0 and "run " in r.stdout, r.stderr
    assert parts[2].name in r.stderr
    assert len(Store(store_path).records()) == 20


def test_validation_is_cached_by_name_size_mtime(store_path, monkeypatch):
    parts = _fill(store_path, 3)
    log = store_path / st.CACHE_FILE
    assert len(log.read_text().splitlines()) == 3  # each writer logged its own part
    calls = []
    real = st.validate_part
    monkeypatch.setattr(st, "validate_part", lambda p, **kw: calls.append(Path(p).name) or real(p, **kw))
    st._OkCache._instances.clear()  # a new process: only the file cache
    Store(store_path).records()
    assert calls == []
    _truncate(parts[1])  # size and mtime change: checked again, quarantined
    with pytest.warns(StoreWarning):
        Store(store_path).records()
    assert calls == [parts[1].name, parts[1].name]  # the check and the second look before moving


def test_queries_write_nothing_even_unlogged_parts(store_path):
    _fill(store_path, 2)
    (store_path / st.CACHE_FILE).unlink()  # parts written by an older version: no log
    st._OkCache._instances.clear()
    before = _digests(store_path)
    assert len(Store(store_path).records()) == 40
    assert _digests(store_path) == before  # checked in memory, nothing written
    Store(store_path).repair()  # repair (a writer) logs every good part
    assert len((store_path / st.CACHE_FILE).read_text().splitlines()) == 2


def test_unmovable_damaged_part_is_skipped_with_a_warning(store_path, monkeypatch):
    """A store the reader may not write (someone else's): the damaged part is skipped, nothing moves."""
    parts = _fill(store_path, 2)
    _zero(parts[0])
    real = os.rename

    def refuse(src, dst):
        if QUARANTINE_DIR in str(dst):
            raise PermissionError(13, "Permission denied")
        return real(src, dst)

    monkeypatch.setattr(st.os, "rename", refuse)
    with pytest.warns(StoreWarning, match=rf"skipping damaged part {parts[0].name}: zero-length"):
        df = Store(store_path).records()
    assert len(df) == 20 and parts[0].exists()


def test_required_columns_are_schema_1():
    assert set(st.REQUIRED_COLUMNS) <= set(st.SCHEMA.names) and len(st.REQUIRED_COLUMNS) == 16
