"""The results store: append-only Parquet files queried through DuckDB.

Every :meth:`Store.append` writes exactly one new Parquet file, first under a
hidden temporary name in the same directory, then ``fsync`` and an atomic
``os.replace`` to its final ``part-*.parquet`` name. Readers only glob
``part-*.parquet``, so a writer killed mid-write leaves at most a hidden
``.tmp`` file that no query sees, and concurrent writers (processes, Slurm
jobs on a shared filesystem) never touch each other's files.

Queries see the table ``results`` (one row per record, schema below) through
DuckDB: ``hwcore.store.query("select name, status from results")``. A record
written inside a plan cell carries the cell's ``cell_id`` (``$HWEVAL_CELL_ID``)
beside its ``run_id``; the column is optional (null in parts written before it
existed, which stay valid).

Nothing damaged costs the rest (:meth:`Store.scan`): before every query each
part's Parquet footer and schema are checked (pyarrow metadata only, cached by
name, size and mtime); a zero-length, truncated, random or foreign-schema part
is moved to ``<store>/quarantine/`` beside a ``.reason.txt`` with a
:class:`StoreWarning` naming it and why, and the query goes on with the rest.
A part damaged past its footer makes the query fail; it is then found by a
full read, quarantined the same way, and the query is retried once. Hidden
``.tmp`` files of killed writers are deleted once older than a grace period
(``$HWEVAL_STORE_TMP_GRACE_S``, default 1 h). Committed rows are never
rewritten: a quarantined part keeps its bytes.

Queries are read-only and sandboxed (:meth:`Store.connect`): one SELECT (or
EXPLAIN) statement, on a DuckDB connection that may open the store's parts and
nothing else (``allowed_paths``, then ``enable_external_access=false`` and
``lock_configuration=true``); COPY, ATTACH, INSTALL, LOAD, EXPORT, SET,
PRAGMA, CREATE, ... are an ``InputError`` naming the statement.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
import time
import tempfile
import uuid
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hwcore.errors import InputError

SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "diverged", "oom", "timeout", "preempted", "skipped")
KINDS = ("kernel", "workload", "fit", "notebook", "collective", "report", "mlperf", "other")
ENV_VAR = "HWEVAL_STORE"
QUARANTINE_DIR = "quarantine"  # damaged parts are moved here, each beside a <name>.reason.txt
TMP_GRACE_ENV = "HWEVAL_STORE_TMP_GRACE_S"
DEFAULT_TMP_GRACE_S = 3600.0  # hidden .tmp files untouched this long belong to a killed writer
CACHE_FILE = ".hweval-parts-ok.log"  # parts known good, by (size, mtime, name); appended by writers

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
        # the plan cell whose attempt (cell_id + run_id) wrote the row; null outside a plan cell and in parts
        # written before the column existed (optional: not in REQUIRED_COLUMNS)
        ("cell_id", pa.string()),
    ]
)
JSON_COLUMNS = ("params", "metrics", "units", "fingerprint")
#: columns every schema-1 part has (spelled out: a column added to SCHEMA later must not make old parts
#: foreign); a part lacking one, having a column SCHEMA does not, or typing one differently is foreign
REQUIRED_COLUMNS = ("schema_version", "record_id", "run_id", "plan", "notebook", "node_id", "kind", "name", "params",
                    "metrics", "units", "fingerprint", "started_at", "finished_at", "status", "error")


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
    cell_id: str | None = None

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
            "cell_id": self.cell_id or os.environ.get("HWEVAL_CELL_ID") or None,
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
        self._tmp_cleaned = False

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
        # os.access says yes to root everywhere, /proc included: create and remove a probe file
        try:
            fd, name = tempfile.mkstemp(dir=probe, prefix=".hweval-probe-")
        except OSError as exc:
            raise InputError(f"store: cannot create files in {probe} ({exc.strerror}; store path {self.path})") from None
        os.close(fd)
        os.unlink(name)

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
        except BaseException:  # clean up, then re-raise (Ctrl-C included)
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.path)
        with contextlib.suppress(OSError, ValueError):
            _OkCache.for_store(self.path).committed(final)
        if not self._tmp_cleaned:  # once per Store object: leftovers of writers killed long ago
            self._tmp_cleaned = True
            with contextlib.suppress(OSError, InputError):
                self.clean_tmp()
        return final

    # -- reading ------------------------------------------------------------------
    def _candidates(self) -> list[Path]:
        """Every committed part file (``part-*.parquet``), outside ``quarantine/`` and hidden folders."""
        self.check_readable()
        if not self.path.exists():
            return []
        out = []
        for p in self.path.glob("**/part-*.parquet"):
            rel = p.relative_to(self.path).parts
            if rel[0] == QUARANTINE_DIR or any(x.startswith(".") for x in rel[:-1]):
                continue
            out.append(p)
        return sorted(out)

    def scan(self, *, quarantine: bool = True, deep: bool = False, tmp_grace_s: float | None = None) -> StoreScan:
        """Check every part (Parquet footer and schema; ``deep`` also reads every row).

        Damaged parts are moved to ``<store>/quarantine/`` with a reason file and a
        :class:`StoreWarning` naming the part and why (``quarantine=False``: only
        reported, nothing changes). Results of the cheap check are cached by
        (name, size, mtime) in memory; parts logged good by their writer in
        ``<store>/.hweval-parts-ok.log`` are not opened at all.
        """
        cache = _OkCache.for_store(self.path)
        good: list[Path] = []
        damaged: list[DamagedPart] = []
        for p in self._candidates():
            try:
                stt = p.stat()
            except FileNotFoundError:  # quarantined or removed by another process meanwhile
                continue
            key = (stt.st_size, stt.st_mtime_ns)
            reason = None
            if not cache.is_ok(p, key, deep=deep):
                reason = validate_part(p, deep=deep)
                if reason is None:
                    cache.mark_ok(p, key, deep=deep)
            if reason is not None and quarantine:
                # a second look before moving anything: never quarantine a part that reads fine now
                reason = validate_part(p, deep=deep) and reason
            if reason is None:
                good.append(p)
                continue
            damaged.append(self._handle_damaged(p, reason, quarantine=quarantine))
        tmp_stale, tmp_fresh = self._tmp_files(tmp_grace_s)
        return StoreScan(store=self.path, parts=good, damaged=damaged, stale_tmp=tmp_stale, fresh_tmp=tmp_fresh,
                         quarantined=self.quarantined())

    def parts(self) -> list[Path]:
        """The committed parts that pass the cheap check (damaged ones are quarantined, with a warning)."""
        return self.scan().parts

    def quarantined(self) -> list[Path]:
        q = self.path / QUARANTINE_DIR
        if not q.is_dir():
            return []
        return sorted(p for p in q.iterdir() if p.name.endswith(".parquet"))

    def _handle_damaged(self, path: Path, reason: str, *, quarantine: bool) -> DamagedPart:
        rel = str(path.relative_to(self.path))
        if not quarantine:
            return DamagedPart(path=path, reason=reason, moved_to=None)
        dest = self._quarantine(path, reason)
        if dest is None:
            warnings.warn(f"store: skipping damaged part {rel}: {reason} (could not move it to "
                          f"{self.path / QUARANTINE_DIR}; run `hweval store repair` with write access)",
                          StoreWarning, stacklevel=3)
        else:
            warnings.warn(f"store: damaged part {rel} quarantined to {dest}: {reason}", StoreWarning, stacklevel=3)
        return DamagedPart(path=path, reason=reason, moved_to=dest)

    def _quarantine(self, path: Path, reason: str) -> Path | None:
        """Move ``path`` into ``<store>/quarantine/`` beside a ``.reason.txt``; None if it cannot be moved."""
        qdir = self.path / QUARANTINE_DIR
        rel = str(path.relative_to(self.path)).replace(os.sep, "__")
        try:
            qdir.mkdir(exist_ok=True)
            dest = qdir / rel
            n = 1
            while dest.exists():
                dest = qdir / f"{rel}.{n}"
                n += 1
            size = path.stat().st_size
            os.rename(path, dest)  # same filesystem: atomic, the bytes are kept as they were
        except FileNotFoundError:
            return None if path.exists() else qdir / rel  # another process moved it first
        except OSError:
            return None
        note = (f"part: {path.relative_to(self.path)}\nreason: {reason}\nsize_bytes: {size}\n"
                f"quarantined_at: {_now().isoformat()}\nby: {socket.gethostname()} pid {os.getpid()}\n")
        with contextlib.suppress(OSError):
            Path(str(dest) + ".reason.txt").write_text(note)
        _fsync_dir(self.path)
        return dest

    def _tmp_files(self, grace_s: float | None = None) -> tuple[list[Path], list[Path]]:
        """Hidden temporary files of writers: (older than the grace period, younger)."""
        if not self.path.is_dir():
            return [], []
        grace = tmp_grace_s() if grace_s is None else grace_s
        now = time.time()
        stale, fresh = [], []
        for p in self.path.glob("**/.*.tmp"):
            rel = p.relative_to(self.path).parts
            if rel[0] == QUARANTINE_DIR or not p.is_file():
                continue
            try:
                age = now - p.stat().st_mtime
            except FileNotFoundError:
                continue
            (stale if age > grace else fresh).append(p)
        return sorted(stale), sorted(fresh)

    def clean_tmp(self, grace_s: float | None = None) -> list[Path]:
        """Delete hidden ``.tmp`` files older than :func:`tmp_grace_s` (left by killed writers); returns them.

        A live writer keeps touching its temporary file, and a part takes seconds
        to write, so a file untouched for the grace period (default 1 h,
        ``$HWEVAL_STORE_TMP_GRACE_S``) belongs to no one.
        """
        removed = []
        for p in self._tmp_files(grace_s)[0]:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
        return removed

    def check(self, *, deep: bool = True, tmp_grace_s: float | None = None) -> StoreScan:
        """Report damaged parts and temporary files; changes nothing (``deep``: read every row)."""
        return self.scan(quarantine=False, deep=deep, tmp_grace_s=tmp_grace_s)

    def repair(self, *, deep: bool = True, tmp_grace_s: float | None = None) -> StoreScan:
        """Quarantine every damaged part (``deep``: after a full read) and delete stale temporary files."""
        self.check_writable()
        with warnings.catch_warnings():  # the returned scan says what was moved
            warnings.simplefilter("ignore", StoreWarning)
            res = self.scan(quarantine=True, deep=deep, tmp_grace_s=tmp_grace_s)
        removed = self.clean_tmp(tmp_grace_s)
        with contextlib.suppress(OSError):
            _OkCache.for_store(self.path).rewrite(res.parts)
        return replace(res, stale_tmp=removed, removed_tmp=True)

    def connect(self, *, sandbox: bool = True):  # -> duckdb.DuckDBPyConnection
        """A DuckDB connection with the view ``results`` over every valid part.

        ``sandbox`` (default): the connection can read the store's parts and
        nothing else, and write nothing: ``allowed_paths`` is exactly the part
        files, then ``enable_external_access=false``, no extension auto-loading,
        and ``lock_configuration=true`` so no ``SET`` turns it back on.
        """
        import duckdb

        con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
        try:
            parts = self.parts()
            files = ["'" + os.path.abspath(p).replace("'", "''") + "'" for p in parts]
            if parts:
                if sandbox:
                    con.execute(f"set allowed_paths = [{', '.join(files)}]")
                con.execute(f"create view results as select * from read_parquet([{', '.join(files)}], "
                            "union_by_name=true)")
            else:
                con.register("_schema_empty", SCHEMA.empty_table())
                con.execute("create table _empty_results as select * from _schema_empty")
                con.unregister("_schema_empty")
                con.execute("create view results as select * from _empty_results")
            if sandbox:
                con.execute("set enable_external_access = false")
                con.execute("set lock_configuration = true")
        except BaseException:  # clean up, then re-raise (Ctrl-C included)
            con.close()
            raise
        return con

    def query(self, sql: str, params: Sequence[Any] | None = None, *, sandbox: bool = True):  # -> DataFrame
        """Run one read-only ``SELECT`` (or ``EXPLAIN``) over the view ``results``.

        Any other statement (COPY, ATTACH, INSTALL, LOAD, EXPORT, SET, PRAGMA,
        CREATE, ...) is an ``InputError`` naming it, and nothing runs. A part
        that turns out damaged past its footer (the query fails reading it) is
        quarantined after a full read and the query is retried once.
        """
        import duckdb

        check_sql(sql)
        for attempt in (0, 1):
            con = self.connect(sandbox=sandbox)
            try:
                return con.execute(sql, params or []).df()
            except duckdb.Error as exc:
                if attempt == 0 and _may_be_damage(exc) and self.scan(deep=True).damaged:
                    continue
                if isinstance(exc, duckdb.PermissionException):
                    raise InputError(f"query: refused: {str(exc).splitlines()[0]} (queries read only the store's "
                                     "view 'results')") from exc
                raise InputError(f"query: {str(exc).splitlines()[0]}") from exc
            finally:
                con.close()
        raise AssertionError("unreachable")

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


# -- part validation, quarantine, read-only queries ---------------------------------------
class StoreWarning(UserWarning):
    """Something in the store was skipped or moved aside (a damaged part)."""


@dataclass(frozen=True)
class DamagedPart:
    path: Path
    reason: str
    moved_to: Path | None  # where it was quarantined (None: reported only, or could not be moved)


@dataclass(frozen=True)
class StoreScan:
    """What :meth:`Store.scan` found."""

    store: Path
    parts: list[Path]
    damaged: list[DamagedPart]
    stale_tmp: list[Path]
    fresh_tmp: list[Path]
    quarantined: list[Path]
    removed_tmp: bool = False

    @property
    def clean(self) -> bool:
        return not self.damaged and not (self.stale_tmp and not self.removed_tmp)


def tmp_grace_s() -> float:
    raw = os.environ.get(TMP_GRACE_ENV)
    if raw is None or raw == "":
        return DEFAULT_TMP_GRACE_S
    try:
        val = float(raw)
    except ValueError:
        val = float("nan")
    if not math.isfinite(val) or val < 0:
        raise InputError(f"{TMP_GRACE_ENV}: expected a finite number of seconds >= 0, got {raw!r}")
    return val


def validate_part(path: str | os.PathLike[str], *, deep: bool = False) -> str | None:
    """Why ``path`` is not a readable part of this store's schema, or None if it is.

    The cheap check reads the file size, both ``PAR1`` magics and the Parquet
    footer (schema, row groups) through pyarrow, never the data pages; ``deep``
    also reads every row.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size == 0:
            return "zero-length file"
        if size < 12:
            return f"truncated: {size} bytes, shorter than any Parquet file"
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, os.SEEK_END)
            tail = fh.read(4)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if head != b"PAR1":
        return "not a Parquet file (no PAR1 magic at the start)"
    if tail != b"PAR1":
        return f"truncated or damaged: no PAR1 footer magic at the end ({size} bytes)"
    try:
        meta = pq.read_metadata(path)
        schema = meta.schema.to_arrow_schema()
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            for j in range(rg.num_columns):
                c = rg.column(j)
                start = c.dictionary_page_offset if c.has_dictionary_page and c.dictionary_page_offset else c.data_page_offset
                if start is not None and start + c.total_compressed_size > size:
                    return f"truncated or damaged: row group {i} column {c.path_in_schema} ends past the end of the file"
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad footer; fault returned
        return f"unreadable Parquet footer: {_first_line(exc)}"
    problem = _schema_problem(schema)
    if problem:
        return f"foreign schema: {problem}"
    if deep:
        try:
            pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for damaged pages; the fault is returned
            return f"damaged data: {_first_line(exc)}"
    return None


def _schema_problem(schema: pa.Schema) -> str | None:
    expected = {f.name: f.type for f in SCHEMA}
    names = list(schema.names)
    unknown = [n for n in names if n not in expected]
    if unknown:
        return f"unknown column(s) {', '.join(unknown)}"
    missing = [n for n in REQUIRED_COLUMNS if n not in names]
    if missing:
        return f"missing column(s) {', '.join(missing)}"
    for f in schema:
        if not f.type.equals(expected[f.name]):
            return f"column {f.name} is {f.type}, expected {expected[f.name]}"
    return None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class _OkCache:
    """Parts known good, keyed by (name, size, mtime_ns): in memory, and in ``<store>/.hweval-parts-ok.log``.

    The log is written only by writers: :meth:`Store.append` adds one line for
    the part it just committed (``O_APPEND``, so concurrent writers interleave
    whole lines), and ``repair`` rewrites it. Readers never write it, so a query
    leaves the store as it was; a part missing from the log is checked once per
    process. A lost or damaged line only costs a re-check.
    """

    _instances: dict[str, _OkCache] = {}
    _lock = threading.Lock()

    def __init__(self, root: Path) -> None:
        self.root = root
        self.file = root / CACHE_FILE
        self.ok: dict[str, tuple[int, int]] = {}
        self.deep_ok: dict[str, tuple[int, int]] = {}
        self._offset = 0
        self._ino: int | None = None

    @classmethod
    def for_store(cls, root: Path) -> _OkCache:
        key = os.path.abspath(root)
        with cls._lock:
            inst = cls._instances.get(key)
            if inst is None:
                inst = cls._instances[key] = cls(root)
        inst._load()
        return inst

    def _load(self) -> None:
        """Read the lines added to the log since the last look (all of it if it was rewritten)."""
        try:
            with open(self.file, "rb") as fh:
                stt = os.fstat(fh.fileno())
                if stt.st_ino != self._ino or stt.st_size < self._offset:
                    self._ino, self._offset = stt.st_ino, 0
                fh.seek(self._offset)
                data = fh.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line being appended right now is read next time
        for line in data[:end].decode(errors="replace").splitlines():
            size, _, rest = line.partition(" ")
            mtime, _, name = rest.partition(" ")
            if size.isdigit() and mtime.isdigit() and name:
                self.ok[name] = (int(size), int(mtime))
        self._offset += end

    def _name(self, p: Path) -> str:
        return str(p.relative_to(self.root))

    def is_ok(self, p: Path, key: tuple[int, int], *, deep: bool) -> bool:
        return (self.deep_ok if deep else self.ok).get(self._name(p)) == key

    def mark_ok(self, p: Path, key: tuple[int, int], *, deep: bool) -> None:
        name = self._name(p)
        if deep:
            self.deep_ok[name] = key
        self.ok[name] = key

    @staticmethod
    def _line(name: str, key: tuple[int, int]) -> str:
        return f"{key[0]} {key[1]} {name}\n"

    def committed(self, p: Path) -> None:
        """A writer just committed ``p`` (wrote it, fsynced and renamed it): log it as good."""
        stt = p.stat()
        key = (stt.st_size, stt.st_mtime_ns)
        name = self._name(p)
        self.ok[name] = key
        fd = os.open(self.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, self._line(name, key).encode())
        finally:
            os.close(fd)

    def rewrite(self, parts: Iterable[Path]) -> None:
        """Replace the log by exactly ``parts`` (checked just now): drops the lines of parts gone."""
        lines = []
        for p in parts:
            key = self.ok.get(self._name(p))
            if key is not None:
                lines.append(self._line(self._name(p), key))
        tmp = self.root / f".{CACHE_FILE}.{os.getpid()}.{uuid.uuid4().hex[:6]}.tmp"
        try:
            tmp.write_text("".join(lines))
            os.replace(tmp, self.file)
        except OSError:
            tmp.unlink(missing_ok=True)
        self._ino, self._offset = None, 0


#: statements --sql may run: anything else (COPY, ATTACH, INSTALL/LOAD, EXPORT, SET, PRAGMA, CREATE, ...) is refused
ALLOWED_STATEMENTS = ("SELECT", "EXPLAIN")


def check_sql(sql: str) -> None:
    """``InputError`` unless ``sql`` is exactly one SELECT / EXPLAIN statement; names what was refused."""
    import duckdb

    if not isinstance(sql, str) or not sql.strip():
        raise InputError("query: empty SQL; expected one SELECT statement over the view 'results'")
    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise InputError(f"query: {_first_line(exc)}") from exc
    if len(stmts) != 1:
        raise InputError(f"query: expected one SELECT statement, got {len(stmts)} statements")
    stmt = stmts[0]
    kind = stmt.type.name
    if kind not in ALLOWED_STATEMENTS:
        words = stmt.query.strip().split(None, 1)
        word = words[0].upper() if words else kind
        raise InputError(f"query: {word} refused: the store is read-only; only SELECT queries over the view "
                         f"'results' run (statement type {kind})")


def _may_be_damage(exc: BaseException) -> bool:
    """Could a failed query be a damaged part (rather than the SQL itself)? Then a deep scan is worth it."""
    import duckdb

    sql_errors = (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                  duckdb.PermissionException)
    return not isinstance(exc, sql_errors)


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
