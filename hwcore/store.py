"""The results store: append-only Parquet files queried through DuckDB.

Every :meth:`Store.append` writes exactly one new Parquet file, first under a
hidden temporary name in the same directory, then ``fsync`` and an atomic
``os.replace`` to its final ``part-*.parquet`` name. Readers only glob
``part-*.parquet``, so a writer killed mid-write leaves at most a hidden
``.tmp`` file that no query sees, and concurrent writers (processes, Slurm
jobs on a shared filesystem) never touch each other's files.

Queries see the table ``results`` (one row per record, schema below) through
DuckDB: ``hwcore.store.query("select name, status from results")``.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hwcore.errors import InputError

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "diverged", "oom", "timeout", "preempted", "skipped")
KINDS = ("kernel", "workload", "fit", "notebook", "collective", "report", "other")
ENV_VAR = "HWEVAL_STORE"

SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("record_id", pa.string()),
        ("run_id", pa.string()),
        ("plan", pa.string()),
        ("notebook", pa.string()),
        ("node_id", pa.string()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("params", pa.string()),  # JSON object
        ("metrics", pa.string()),  # JSON object
        ("units", pa.string()),  # JSON object: metric -> unit
        ("fingerprint", pa.string()),  # JSON object
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("finished_at", pa.timestamp("us", tz="UTC")),
        ("status", pa.string()),
        ("error", pa.string()),
    ]
)
JSON_COLUMNS = ("params", "metrics", "units", "fingerprint")


def _now() -> datetime:
    return datetime.now(UTC)


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


@dataclass(kw_only=True)
class Record:
    """One result: a kernel measurement, a training run, a fit, a notebook's status."""

    kind: str
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    status: str = "ok"
    error: str | None = None
    run_id: str = ""
    plan: str | None = None
    notebook: str | None = None
    node_id: str | None = None
    fingerprint: dict[str, Any] | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    record_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise InputError(f"record.status: unknown value {self.status!r}; valid choices: {', '.join(STATUSES)}")
        if self.kind not in KINDS:
            raise InputError(f"record.kind: unknown value {self.kind!r}; valid choices: {', '.join(KINDS)}")
        if not self.name:
            raise InputError("record.name must be a non-empty string")

    def to_row(self) -> dict[str, Any]:
        fp = self.fingerprint
        if fp is None:
            from hwcore.fingerprint import fingerprint

            fp = fingerprint()
        finished = self.finished_at or _now()
        return {
            "schema_version": SCHEMA_VERSION,
            "record_id": self.record_id,
            "run_id": self.run_id or os.environ.get("HWEVAL_RUN_ID") or new_run_id(),
            "plan": self.plan if self.plan is not None else os.environ.get("HWEVAL_PLAN"),
            "notebook": self.notebook if self.notebook is not None else os.environ.get("HWEVAL_NOTEBOOK"),
            "node_id": self.node_id or fp.get("node_id"),
            "kind": self.kind,
            "name": self.name,
            "params": json.dumps(self.params, sort_keys=True, default=_json_default),
            "metrics": json.dumps(self.metrics, sort_keys=True, default=_json_default, allow_nan=True),
            "units": json.dumps(self.units, sort_keys=True),
            "fingerprint": json.dumps(fp, sort_keys=True, default=str),
            "started_at": self.started_at or finished,
            "finished_at": finished,
            "status": self.status,
            "error": self.error,
        }


def _json_default(o: Any) -> Any:
    for attr in ("tolist", "item"):
        if hasattr(o, attr):
            return getattr(o, attr)()
    if hasattr(o, "to_dict"):
        return o.to_dict()
    return str(o)


def default_path() -> Path:
    """``$HWEVAL_STORE``, else ``data/results`` of the checkout, else of the working dir."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parent.parent
    if (repo / "pyproject.toml").exists():
        return repo / "data" / "results"
    return Path.cwd() / "data" / "results"


class Store:
    """An append-only directory of Parquet parts."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- validation -------------------------------------------------------------
    def check_readable(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise InputError(f"store: {self.path} exists and is not a directory")

    def check_writable(self) -> None:
        """Raise ``InputError`` unless records can be written here; creates nothing."""
        self.check_readable()
        probe = self.path
        while not probe.exists():
            if probe.parent == probe:
                break
            probe = probe.parent
        if not probe.is_dir():
            raise InputError(f"store: {probe} is not a directory, cannot create {self.path}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise InputError(f"store: {probe} is not writable (store path {self.path})")

    # -- writing ------------------------------------------------------------------
    def append(self, records: Record | Iterable[Record]) -> Path | None:
        """Write ``records`` as one new Parquet part; returns its path (None if empty)."""
        if isinstance(records, Record):
            records = [records]
        rows = [r.to_row() for r in records]
        if not rows:
            return None
        self.check_writable()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"store: cannot create {self.path}: {exc.strerror}") from exc
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        stamp = _now().strftime("%Y%m%dT%H%M%S%f")
        base = f"part-{stamp}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        final = self.path / base
        tmp = self.path / f".{base}.tmp"
        try:
            with open(tmp, "wb") as fh:
                pq.write_table(table, fh, compression="zstd")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path)
        return final

    # -- reading ------------------------------------------------------------------
    def parts(self) -> list[Path]:
        self.check_readable()
        if not self.path.exists():
            return []
        return sorted(self.path.glob("**/part-*.parquet"))

    def connect(self):  # -> duckdb.DuckDBPyConnection
        """A DuckDB connection with the view ``results`` over every part."""
        import duckdb

        con = duckdb.connect()
        parts = self.parts()
        if parts:
            files = ", ".join("'" + str(p).replace("'", "''") + "'" for p in parts)
            con.execute(f"create view results as select * from read_parquet([{files}], union_by_name=true)")
        else:
            con.register("_empty_results", SCHEMA.empty_table())
            con.execute("create view results as select * from _empty_results")
        return con

    def query(self, sql: str, params: Sequence[Any] | None = None):  # -> pandas.DataFrame
        import duckdb

        con = self.connect()
        try:
            return con.execute(sql, params or []).df()
        except duckdb.Error as exc:
            raise InputError(f"query: {str(exc).splitlines()[0]}") from exc
        finally:
            con.close()

    def records(self, **filters: Any):  # -> pandas.DataFrame
        """All rows, filtered by equality on columns (``status="ok"``)."""
        cols = set(SCHEMA.names)
        where, args = [], []
        for key, val in filters.items():
            if val is None:
                continue
            if key not in cols:
                raise InputError(f"results filter: unknown column {key!r}; valid choices: {', '.join(sorted(cols))}")
            where.append(f"{key} = ?")
            args.append(val)
        sql = "select * from results" + (" where " + " and ".join(where) if where else "")
        return self.query(sql + " order by finished_at", args)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def query(sql: str, store: str | os.PathLike[str] | None = None):  # -> pandas.DataFrame
    """Run ``sql`` against the ``results`` view of the store (default: :func:`default_path`)."""
    return Store(store).query(sql)


def append(records: Record | Iterable[Record], store: str | os.PathLike[str] | None = None) -> Path | None:
    return Store(store).append(records)


def decode(df):  # pandas.DataFrame -> pandas.DataFrame
    """Parse the JSON columns of a results frame into Python objects."""
    df = df.copy()
    for col in JSON_COLUMNS:
        if col in df.columns:
            df[col] = df[col].map(lambda s: json.loads(s) if isinstance(s, str) else s)
    return df
