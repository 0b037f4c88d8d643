"""The one parser of raw nccl-tests stdout (``all_reduce_perf``, ``all_gather_perf``, ... ``sendrecv_perf``).

The format (nccl-tests ``src/common.cu``, ``doc/PERFORMANCE.md``): ``#``
header lines, then one row per message size::

    # nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 ...
    #  Rank  0 Group  0 Pid 1006102 on pool0-01806 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
    #       size    count   type  redop   root     time  algbw  busbw #wrong     time  algbw  busbw #wrong
         1048576   262144  float    sum     -1    27.37  38.31  67.04      0    26.93  38.94  68.14      0

``time`` is in microseconds, ``algbw``/``busbw`` in GB/s (1e9 B/s); the
first four measured columns are out-of-place, the last four in-place. Older
versions (before the ``root`` column, 2019) print ``size count type redop time
algbw busbw error ...`` with a float ``error``; both are read. Prefixes that
launchers add to every line are stripped: Slurm's ``srun --label`` (``0:``),
Open MPI's ``--tag-output`` (``[1,0]<stdout>:``) and an ISO timestamp
(Kubernetes ``kubectl logs --timestamps``).

Lines that are neither ``#`` comments nor numeric rows (NCCL INFO/WARN
chatter, shell prompts) are skipped; a line that starts like a row (a number)
but does not parse as one is an error naming the file and line.

Ranks come from the ``# Rank N ...`` lines (their count), device names from
the same lines; the collective from ``# Collective test starting: X_perf``,
else from a ``*_perf`` name in the file name, else the caller must say.

Pure (no I/O, nothing of ours outside hwmodels): the importer
(:mod:`hweval.importers.nccl_tests`) adds provenance and store records, the
predictor's calibration (:mod:`hwmodels.predict.calibration`) reads the
published logs under ``data/reference/nccl_tests`` through it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hwmodels.errors import ModelInputError

#: nccl-tests binaries -> collective names used by hwmodels.comms
BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "alltoall",
    "sendrecv_perf": "sendrecv",
}
COLLECTIVES = tuple(BINARIES.values())
DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
          "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2")

_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\s*\d+:(?=\s)|\d{4}-\d\d-\d\dT[\d:.]+Z\s)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$")
_START = re.compile(r"^#\s*Collective test starting:\s*(\w+)")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\S+)")
_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.eE+-]+)")
_NUM = re.compile(r"^\d")


@dataclass(frozen=True)
class NcclRow:
    """One message size: out-of-place and in-place time (s), algbw and busbw (B/s), #wrong."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    time_s: float
    algbw: float
    busbw: float
    wrong: float | None
    inplace_time_s: float
    inplace_algbw: float
    inplace_busbw: float
    inplace_wrong: float | None


@dataclass(frozen=True)
class Device:
    rank: int
    host: str
    device: int
    name: str


@dataclass(frozen=True)
class NcclTable:
    """One parsed nccl-tests table (a file may hold several)."""

    path: str
    collective: str
    ranks: int | None
    devices: tuple[Device, ...]
    rows: tuple[NcclRow, ...]
    header: dict[str, Any] = field(default_factory=dict)
    nccl_version: str | None = None
    tests_version: str | None = None
    avg_busbw: float | None = None

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.host for d in self.devices))

    @property
    def device_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.name for d in self.devices))

    @property
    def nodes(self) -> int | None:
        return len(self.hosts) or None

    def arrays(self, *, inplace: bool = False):
        """(size_bytes, time_s, busbw) numpy arrays of the rows, out-of-place unless ``inplace``."""
        import numpy as np

        s = np.array([r.size_bytes for r in self.rows], dtype=float)
        if inplace:
            return s, np.array([r.inplace_time_s for r in self.rows]), np.array([r.inplace_busbw for r in self.rows])
        return s, np.array([r.time_s for r in self.rows]), np.array([r.busbw for r in self.rows])


def _collective_from_name(name: str) -> str | None:
    hits = [c for b, c in BINARIES.items() if b in name]
    if not hits:
        hits = [c for c in COLLECTIVES if c in name]
    # "reduce" is inside "all_reduce"/"reduce_scatter": the longest match wins
    return max(hits, key=len) if hits else None


def _float(tok: str, path: str, line: int, what: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise _line_error(path, line, f"{what} {tok!r} is not a number") from None
    if not math.isfinite(v):
        raise _line_error(path, line, f"{what} {tok!r} is not finite")
    return v


def _wrong(tok: str, path: str, line: int) -> float | None:
    if tok.upper() == "N/A":
        return None
    return _float(tok, path, line, "#wrong")


def _parse_row(toks: Sequence[str], has_root: bool | None, path: str, line: int) -> NcclRow:
    n = len(toks)
    if has_root is None:  # no column header seen: infer from the row
        if n not in (12, 13):
            raise _line_error(path, line, "a result row needs 13 columns (size count type redop root time algbw busbw "
                                         "#wrong time algbw busbw #wrong), or 12 without root (nccl-tests before "
                                         f"2019), found {n}")
        has_root = n == 13
    want = 13 if has_root else 12
    if n != want:
        raise _line_error(path, line, f"a result row needs {want} columns (size count type redop{' root' if has_root else ''} "
                                     f"time algbw busbw #wrong time algbw busbw #wrong), found {n}")
    try:
        size, count = int(toks[0]), int(toks[1])
    except ValueError:
        raise _line_error(path, line, f"size {toks[0]!r} and count {toks[1]!r} must be integers") from None
    if size < 0 or count < 0:
        raise _line_error(path, line, "size and count must be >= 0")
    dtype, redop = toks[2], toks[3]
    if dtype not in DTYPES:
        raise _line_error(path, line, f"type: unknown value {dtype!r}; valid choices: {', '.join(DTYPES)}")
    i = 4
    root = None
    if has_root:
        root = int(_float(toks[4], path, line, "root"))
        i = 5
    t, alg, bus = (_float(toks[i + k], path, line, w) for k, w in enumerate(("time", "algbw", "busbw")))
    w = _wrong(toks[i + 3], path, line)
    ti, algi, busi = (_float(toks[i + 4 + k], path, line, "in-place " + w_) for k, w_ in
                      enumerate(("time", "algbw", "busbw")))
    wi = _wrong(toks[i + 7], path, line)
    for v, what in ((t, "time"), (ti, "in-place time"), (alg, "algbw"), (bus, "busbw"), (algi, "in-place algbw"),
                    (busi, "in-place busbw")):
        if v < 0:
            raise _line_error(path, line, f"{what} must be >= 0, got {v}")
    return NcclRow(line=line, size_bytes=size, count=count, dtype=dtype, redop=redop, root=root, time_s=t * 1e-6,
                   algbw=alg * 1e9, busbw=bus * 1e9, wrong=w, inplace_time_s=ti * 1e-6, inplace_algbw=algi * 1e9,
                   inplace_busbw=busi * 1e9, inplace_wrong=wi)


def _header_fields(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, pat in (("nThread", r"nThread\s+(\d+)"), ("nGpus", r"nGpus\s+(\d+)"), ("minBytes", r"minBytes\s+(\d+)"),
                     ("maxBytes", r"maxBytes\s+(\d+)"), ("warmup_iters", r"warmup iters:\s*(\d+)"),
                     ("iters", r"(?<!warmup )(?<!agg )iters:\s*(\d+)"), ("agg_iters", r"agg iters:\s*(\d+)"),
                     ("validation", r"validation:\s*(\d+)"), ("graph", r"graph:\s*(\d+)")):
        m = re.search(pat, text)
        if m:
            out[key] = int(m.group(1))
    return out


def parse_text(text: str, *, path: str = "<text>", collective: str | None = None,
               ranks: int | None = None) -> list[NcclTable]:
    """Every table in ``text`` (normally one). Raises ``ModelInputError`` naming ``path`` and line."""
    if collective is not None and collective not in COLLECTIVES:
        raise ModelInputError(f"--collective: unknown value {collective!r}; valid choices: {', '.join(COLLECTIVES)}")
    name_guess = _collective_from_name(path.rsplit("/", 1)[-1])
    tables: list[dict[str, Any]] = []

    def new_table() -> dict[str, Any]:
        t = {"rows": [], "devices": [], "header": {}, "announced": None, "has_root": None, "avg": None,
             "nccl": None, "tests": None, "line": 0}
        tables.append(t)
        return t

    cur = new_table()
    nccl_version = tests_version = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1).strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if m := _TESTS_VERSION.match(line):
                tests_version = m.group(1)
            if m := _START.match(line):
                if cur["rows"] or cur["announced"]:
                    cur = new_table()
                cur["announced"] = m.group(1)
            elif body.startswith("nThread"):
                if cur["rows"]:
                    cur = new_table()
                cur["header"] = _header_fields(body)
            elif m := _RANK.match(line):
                if cur["rows"]:
                    cur = new_table()
                cur["devices"].append(Device(rank=int(m.group(1)), host=m.group(2), device=int(m.group(3)),
                                             name=m.group(4)))
            elif body.startswith("size") and "count" in body and "busbw" in body:
                cur["has_root"] = " root " in f" {body} "
            elif m := _AVG.match(line):
                cur["avg"] = float(m.group(1)) * 1e9
            continue
        if m := _NCCL_VERSION.search(line):
            nccl_version = m.group(1)
            continue
        if not _NUM.match(line):
            continue  # NCCL INFO lines, prompts, launcher chatter
        cur["rows"].append(_parse_row(line.split(), cur["has_root"], path, lineno))
        if not cur["line"]:
            cur["line"] = lineno

    out = []
    for t in tables:
        if not t["rows"]:
            continue
        coll = collective or (BINARIES.get(t["announced"]) if t["announced"] else None) or name_guess
        if coll is None:
            raise _line_error(path, t["line"], "cannot tell which collective this table measures (no "
                             "'# Collective test starting:' line and no *_perf name in the file name); "
                             f"pass --collective, one of: {', '.join(COLLECTIVES)}")
        n = ranks if ranks is not None else (len({d.rank for d in t["devices"]}) or None)
        out.append(NcclTable(path=path, collective=coll, ranks=n, devices=tuple(t["devices"]),
                           rows=tuple(t["rows"]), header=t["header"], nccl_version=nccl_version,
                           tests_version=tests_version, avg_busbw=t["avg"]))
    if not out:
        raise ModelInputError(f"{path}: no nccl-tests result rows found (expected lines like "
                         "'  1048576  262144  float  sum  -1  27.37  38.31  67.04  0  26.93  38.94  68.14  0')")
    return out


def looks_like_line(raw: str) -> bool:
    """True when one line reads as nccl-tests output (its column header or a result row), not CSV."""
    line = _PREFIX.sub("", raw, count=1).strip()
    if line.startswith("#") and "busbw" in line and "size" in line and "," not in line:
        return True
    toks = line.split()
    return len(toks) in (12, 13) and bool(_NUM.match(line)) and "," not in line and toks[2] in DTYPES


def _line_error(path: str, line: int, message: str) -> ModelInputError:
    """``ModelInputError("path:line: message")``: the one-line form of every parse error."""
    return ModelInputError(f"{path}:{line}: {message}")


__all__ = ["NcclTable", "NcclRow", "Device", "parse_text", "looks_like_line", "BINARIES", "COLLECTIVES", "DTYPES"]
