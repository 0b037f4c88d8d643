"""Import raw nccl-tests stdout (``all_reduce_perf``, ``all_gather_perf``, ... ``sendrecv_perf``) into the store.

The parsing is :mod:`hwmodels.nccl_tests` (the one parser of this format, shared
with the predictor's calibration); this module adds the file's provenance and
writes ``KernelRecord`` rows. The format, the launcher prefixes it strips and
where ranks, device names and the collective come from are described there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from hwcore.errors import InputError
from hweval.importers.common import Source
from hwmodels.errors import ModelInputError
from hwmodels.nccl_tests import BINARIES, COLLECTIVES, DTYPES, Device, NcclRow, NcclTable, looks_like_line, parse_text

IMPORTER = "nccl-tests"
VERSION = "1"
__all__ = ["NcclLog", "NcclRow", "Device", "parse", "parse_file", "to_records", "match_node_id",
           "looks_like_nccl_tests", "sweeps_from_store", "BINARIES", "COLLECTIVES", "DTYPES"]


@dataclass(frozen=True)
class NcclLog(NcclTable):
    """One parsed nccl-tests table (:class:`hwmodels.nccl_tests.NcclTable`) with the file it came from."""

    source: Source | None = None


def parse(source: Source, *, collective: str | None = None, ranks: int | None = None) -> list[NcclLog]:
    """Every table in ``source`` (normally one), parsed by :func:`hwmodels.nccl_tests.parse_text`.

    Raises ``InputError`` naming file and line.
    """
    try:
        tables = parse_text(source.text, path=source.path, collective=collective, ranks=ranks)
    except ModelInputError as exc:
        raise InputError(str(exc)) from None
    return [NcclLog(**{f.name: getattr(t, f.name) for f in fields(t)}, source=source) for t in tables]


def parse_file(path: str, *, collective: str | None = None, ranks: int | None = None) -> list[NcclLog]:
    return parse(Source.read(path), collective=collective, ranks=ranks)


def to_records(log: NcclLog, *, node_id: str | None = None, run_id: str = "") -> list[Any]:
    """One ``KernelRecord`` (kind "kernel", name = the collective) per row, with provenance."""
    from hwcore.records import KernelRecord

    if log.ranks is None:
        raise InputError(f"{log.source.path}: no '# Rank N ...' lines, so the rank count is unknown; pass --ranks")
    devices = log.device_names
    fp = {"imported": True, "importer": IMPORTER, "hosts": list(log.hosts),
          "gpus": [{"name": d} for d in devices], "node_id": node_id, "nccl_version": log.nccl_version,
          "nccl_tests_version": log.tests_version}
    recs = []
    for r in log.rows:
        params = {"size_bytes": r.size_bytes, "count": r.count, "type": r.dtype, "redop": r.redop, "root": r.root,
                  "ranks": log.ranks, "world_size": log.ranks, "nodes": log.nodes, "iters": log.header.get("iters"),
                  **log.source.provenance(IMPORTER, VERSION, r.line)}
        metrics = {"time_s": r.time_s, "algbw_bytes_per_s": r.algbw, "busbw_bytes_per_s": r.busbw,
                   "wrong": r.wrong, "inplace_time_s": r.inplace_time_s,
                   "inplace_algbw_bytes_per_s": r.inplace_algbw, "inplace_busbw_bytes_per_s": r.inplace_busbw,
                   "inplace_wrong": r.inplace_wrong}
        units = {"time_s": "s", "algbw_bytes_per_s": "B/s", "busbw_bytes_per_s": "B/s", "inplace_time_s": "s",
                 "inplace_algbw_bytes_per_s": "B/s", "inplace_busbw_bytes_per_s": "B/s"}
        recs.append(KernelRecord(kernel=log.collective, kind="kernel", device=devices[0] if devices else "unknown",
                                 params=params, metrics=metrics, units=units, node_id=node_id, fingerprint=fp,
                                 run_id=run_id).to_record())
    return recs


def match_node_id(log: NcclLog) -> str | None:
    """The catalog node whose ``gpu_name_contains`` matches every device name, else None."""
    if not log.device_names:
        return None
    from hwmodels.catalog import match_node

    node = match_node({"gpus": [{"name": d} for d in log.device_names]})
    return node.id if node is not None else None


def looks_like_nccl_tests(path: str, *, max_lines: int = 400) -> bool:
    """True when ``path`` reads as raw nccl-tests stdout (its column header or a result row), not a CSV."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for i, raw in enumerate(fh):
                if i >= max_lines:
                    break
                if looks_like_line(raw):
                    return True
    except OSError:
        return False
    return False


def sweeps_from_store(store: Any, *, collective: str | None = None, node_id: str | None = None) -> list[dict[str, Any]]:
    """Imported nccl-tests sweeps read back from ``store``, one per (source file, collective, ranks).

    Each: ``collective``, ``ranks``, ``node_id``, ``source_path``, ``source_sha256``,
    ``size_bytes`` and ``time_s`` (numpy arrays holding out-of-place then
    in-place times: replicates for :class:`hwmodels.comms.CommsModel`), so a
    fit is ``CommsModel(collective=c).fit(sw["size_bytes"], time_s=sw["time_s"], ranks=sw["ranks"])``.
    """
    import numpy as np

    from hwcore.records import KernelRecord, read

    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for rec in read(store, KernelRecord, node_id=node_id, name=collective):
        p, m = rec.params, rec.metrics
        if p.get("importer") != IMPORTER or rec.status != "ok":
            continue
        key = (str(p.get("source_sha256")), rec.kernel, int(p.get("ranks") or 0))
        g = groups.setdefault(key, {"collective": rec.kernel, "ranks": key[2], "node_id": rec.node_id,
                                    "source_path": p.get("source_path"), "source_sha256": key[0], "_s": [], "_t": [],
                                    "_ti": []})
        t, ti = m.get("time_s"), m.get("inplace_time_s")
        s = p.get("size_bytes")
        if s and t and ti and s > 0 and t > 0 and ti > 0:
            g["_s"].append(float(s))
            g["_t"].append(float(t))
            g["_ti"].append(float(ti))
    out = []
    for g in groups.values():
        s, t, ti = np.array(g.pop("_s")), np.array(g.pop("_t")), np.array(g.pop("_ti"))
        order = np.argsort(s, kind="stable")
        g["size_bytes"] = np.r_[s[order], s[order]]
        g["time_s"] = np.r_[t[order], ti[order]]
        out.append(g)
    return sorted(out, key=lambda g: (g["collective"], g["ranks"], g["source_path"] or ""))
