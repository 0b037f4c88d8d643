"""Parse MLPerf Training result logs (``:::MLLOG`` lines) and system description JSON.

A result file is one run: the reference ``mlperf_logging`` package prints one
``:::MLLOG {json}`` line per event, the JSON holding ``namespace``,
``time_ms``, ``event_type`` (``POINT_IN_TIME``, ``INTERVAL_START``,
``INTERVAL_END``), ``key``, ``value`` and ``metadata`` (mlcommons/logging,
``mlperf_logging/mllog``). Keys read here:

* ``submission_benchmark``, ``submission_org``, ``submission_division``,
  ``submission_status``, ``submission_platform`` (the system description's
  name), ``global_batch_size``, ``seed``;
* ``run_start`` / ``run_stop`` (``metadata.status`` = ``success`` or
  ``aborted``): the run result is the wall clock between them (MLPerf Training
  rules, "Run Results");
* ``eval_accuracy`` with ``metadata.epoch_num`` and/or ``samples_count``: the
  eval curve;
* ``block_start`` / ``block_stop``: the training blocks between evaluations.
  Their summed span with the samples trained (the last cumulative
  ``samples_count`` of an ``eval_*``, ``epoch_stop`` or ``run_stop`` event,
  less that of ``epoch_start``/``run_start``) is the training-only throughput
  (``MlperfRun.train_samples_per_s``): the step rate a step-time model is
  compared with, without the evaluations and initialisation a time to train
  includes. With several ranks logging, the first ``block_start`` opens a
  block and the first ``block_stop`` closes it.

Lines without ``:::MLLOG`` (framework chatter) are skipped, and so is any
prefix before the tag (``[0] :::MLLOG``, ``0: :::MLLOG``). When several ranks
log the same events, the clock starts at the first ``run_start`` and stops at
the first ``run_stop`` (the rules: "The clock may be stopped as soon as any
part of the system determines target accuracy has been reached"), and repeated
eval points are kept once; a ``run_start`` after a ``run_stop`` (two runs in
one file) is an error. A ``:::MLLOG`` line
whose JSON does not parse, or lacks ``key``/``time_ms``, is an error naming the
file and line.

A system description (``systems/<name>.json`` in a submission) gives
``accelerator_model_name``, ``accelerators_per_node`` and ``number_of_nodes``
(and more); it is joined to runs by ``submission_platform`` = the file's stem
or its ``system_name``.

**Benchmark result** (MLPerf Training rules, mlcommons/training_policies
``training_rules.adoc``, "Benchmark Results"; read at commit 001952a7):
"computed by dropping the fastest and slowest runs, then taking the mean of the
remaining times. For this purpose, a single non-converging run may be treated
as the slowest run and dropped. A benchmark result is invalid if there is more
than one non-converging run." Required run counts per benchmark are in the
same section (``RUNS_REQUIRED``; that version's table; later rounds changed
the benchmark list, so a count not in the table is reported, not enforced).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwcore.errors import InputError
from hweval.importers.common import Source, line_error

IMPORTER = "mlperf"
VERSION = "1"
RULES_SOURCE = ("mlcommons/training_policies training_rules.adoc, 'Benchmark Results' "
                "(commit 001952a787bc62aecdc2d5cddf8d30e58d69a106)")
#: "Number of Runs" per benchmark, training_rules.adoc "Benchmark Results" (commit 001952a7)
RUNS_REQUIRED = {"resnet": 5, "ssd": 5, "maskrcnn": 5, "gnmt": 10, "transformer": 10, "bert": 10, "dlrm": 5,
                 "minigo": 10}
SYSTEM_KEYS = ("system_name", "submitter", "division", "status", "system_type", "number_of_nodes",
               "host_processors_per_node", "host_processor_model_name", "accelerators_per_node",
               "accelerator_model_name", "accelerator_memory_capacity", "accelerator_interconnect",
               "host_networking", "framework")
_TAG = ":::MLLOG"
#: events whose ``metadata.samples_count`` is the run's cumulative count (block events are left out: some
#: implementations log the block's own count there, others the cumulative count at its start)
_CUMULATIVE = ("run_start", "epoch_start", "eval_start", "eval_accuracy", "eval_stop", "epoch_stop", "run_stop")


@dataclass(frozen=True)
class EvalPoint:
    line: int
    time_ms: float
    value: float
    epoch_num: float | None
    samples_count: float | None


@dataclass(frozen=True)
class MlperfRun:
    """One result file: a training run."""

    source: Source
    benchmark: str
    submission: dict[str, Any]
    run_start_ms: float | None
    run_stop_ms: float | None
    run_status: str | None  # metadata.status of run_stop: "success" / "aborted"; None when missing
    evals: tuple[EvalPoint, ...]
    global_batch_size: float | None = None
    seed: Any = None
    start_line: int | None = None
    #: training blocks (``block_start`` .. ``block_stop``), wall-clock seconds summed; evaluation and init are
    #: outside them. None: the log has no blocks
    block_time_s: float | None = None
    blocks: int = 0
    #: samples trained over the run: the last cumulative ``samples_count`` an ``eval_*``/``epoch_stop``/``run_stop``
    #: event carries, less the one ``epoch_start``/``run_start`` carries (a run resumed from a checkpoint)
    train_samples: float | None = None

    @property
    def platform(self) -> str | None:
        return self.submission.get("platform")

    @property
    def converged(self) -> bool:
        return self.run_status == "success" and self.time_to_train_s is not None

    @property
    def train_samples_per_s(self) -> float | None:
        """Training throughput over the blocks only (samples / summed block time): the step rate, without the
        evaluations and initialisation a time to train includes."""
        if not self.block_time_s or not self.train_samples:
            return None
        return self.train_samples / self.block_time_s

    @property
    def time_to_train_s(self) -> float | None:
        if self.run_start_ms is None or self.run_stop_ms is None:
            return None
        return (self.run_stop_ms - self.run_start_ms) / 1e3


@dataclass(frozen=True)
class SystemDesc:
    source: Source
    name: str
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def accelerators(self) -> int | None:
        try:
            return int(self.fields["accelerators_per_node"]) * int(self.fields["number_of_nodes"])
        except (KeyError, TypeError, ValueError):
            return None


def parse_result(source: Source) -> MlperfRun:
    path = source.path
    sub: dict[str, Any] = {}
    start = stop = None
    status = None
    start_line = None
    evals: list[EvalPoint] = []
    gbs = seed = None
    seen = False
    block_open: float | None = None
    block_s, blocks = 0.0, 0
    count_first: float | None = None
    count_last: float | None = None
    for lineno, raw in enumerate(source.text.splitlines(), start=1):
        i = raw.find(_TAG)
        if i < 0:
            continue
        seen = True
        payload = raw[i + len(_TAG):].strip()
        try:
            ev = json.loads(payload)
        except json.JSONDecodeError as exc:
            raise line_error(path, lineno, f":::MLLOG payload is not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(ev, dict):
            raise line_error(path, lineno, ":::MLLOG payload must be a JSON object")
        key, t = ev.get("key"), ev.get("time_ms")
        if not isinstance(key, str) or not key:
            raise line_error(path, lineno, ":::MLLOG event has no 'key'")
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise line_error(path, lineno, f":::MLLOG event {key!r}: 'time_ms' must be a number, got {t!r}")
        md = ev.get("metadata") or {}
        if not isinstance(md, dict):
            raise line_error(path, lineno, f":::MLLOG event {key!r}: 'metadata' must be an object")
        val = ev.get("value")
        sc = md.get("samples_count")
        if sc is not None and key in _CUMULATIVE:
            sc = _number(sc, path, lineno, f"{key}.metadata.samples_count")
            if key in ("epoch_start", "run_start"):
                count_first = sc if count_first is None else min(count_first, sc)
            else:
                count_last = sc if count_last is None else max(count_last, sc)
        if key == "block_start" and block_open is None:  # several ranks may log it: the first opens the block
            block_open = float(t)
        elif key == "block_stop" and block_open is not None:  # ... and the first stop closes it
            if float(t) < block_open:
                raise line_error(path, lineno, "block_stop is before its block_start")
            block_s += (float(t) - block_open) / 1e3
            blocks += 1
            block_open = None
        if key.startswith("submission_"):
            sub[key[len("submission_"):]] = val
        elif key == "global_batch_size":
            gbs = _number(val, path, lineno, key)
        elif key == "seed":
            seed = val
        elif key == "run_start":
            if stop is not None:
                raise line_error(path, lineno, "run_start after run_stop: one result file holds one run "
                                 "(split the file per run)")
            if start is None or float(t) < start:  # several ranks may each log it: the clock starts at the first
                start, start_line = float(t), lineno
        elif key == "run_stop":
            st = md.get("status")
            if st is not None and not isinstance(st, str):
                raise line_error(path, lineno, f"run_stop: metadata.status must be a string, got {st!r}")
            if stop is None or float(t) < stop:  # the clock stops when any part of the system reaches the target
                stop, status = float(t), st
        elif key == "eval_accuracy":
            v = _number(val, path, lineno, key)
            ep, sc = md.get("epoch_num"), md.get("samples_count")
            ep = None if ep is None else _number(ep, path, lineno, "eval_accuracy.metadata.epoch_num")
            sc = None if sc is None else _number(sc, path, lineno, "eval_accuracy.metadata.samples_count")
            if not any(e.value == v and e.epoch_num == ep and e.samples_count == sc for e in evals[-4:]):
                evals.append(EvalPoint(line=lineno, time_ms=float(t), value=v, epoch_num=ep, samples_count=sc))
    if not seen:
        raise InputError(f"{path}: no ':::MLLOG' lines (not an MLPerf Training result log)")
    if start is None:
        raise InputError(f"{path}: no run_start event, so there is no time to train")
    if stop is not None and stop < start:
        raise InputError(f"{path}: run_stop ({stop:.0f} ms) is before run_start ({start:.0f} ms)")
    bench = sub.get("benchmark")
    if not isinstance(bench, str) or not bench:
        raise InputError(f"{path}: no submission_benchmark event naming the benchmark")
    samples = None if count_last is None else count_last - (count_first or 0.0)
    return MlperfRun(source=source, benchmark=bench, submission=sub, run_start_ms=start, run_stop_ms=stop,
                     run_status=status, evals=tuple(evals), global_batch_size=gbs, seed=seed, start_line=start_line,
                     block_time_s=block_s if blocks else None, blocks=blocks,
                     train_samples=samples if samples and samples > 0 else None)


def _number(v: Any, path: str, line: int, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise line_error(path, line, f"{what}: expected a number, got {v!r}")
    return float(v)


def parse_system(source: Source) -> SystemDesc:
    try:
        data = json.loads(source.text)
    except json.JSONDecodeError as exc:
        raise line_error(source.path, exc.lineno, f"system description is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise InputError(f"{source.path}: system description must be a JSON object")
    missing = [k for k in ("accelerator_model_name", "accelerators_per_node", "number_of_nodes") if k not in data]
    if missing:
        raise InputError(f"{source.path}: system description lacks {', '.join(missing)}")
    for k in ("accelerators_per_node", "number_of_nodes"):
        try:
            if int(data[k]) < 0 or float(data[k]) != int(data[k]):
                raise ValueError
        except (TypeError, ValueError):
            raise InputError(f"{source.path}: {k} must be a whole number >= 0, got {data[k]!r}") from None
    name = Path(source.path).stem
    return SystemDesc(source=source, name=name, fields={k: data[k] for k in SYSTEM_KEYS if k in data})


def olympic_mean(times_s: list[float | None]) -> dict[str, Any]:
    """MLPerf's benchmark result from run times (None = a non-converging run), per the module docstring."""
    n = len(times_s)
    failed = sum(t is None for t in times_s)
    ok = sorted(t for t in times_s if t is not None)
    if failed > 1:
        return {"valid": False, "reason": f"{failed} non-converging runs (at most 1 allowed)", "runs": n}
    if n < 3:
        return {"valid": False, "reason": f"{n} run(s): dropping the fastest and slowest needs at least 3", "runs": n}
    kept = ok[1:] if failed else ok[1:-1]  # a single non-converging run counts as the slowest
    return {"valid": True, "time_to_train_s": sum(kept) / len(kept), "runs": n, "kept": len(kept),
            "dropped_fastest_s": ok[0], "dropped_slowest_s": None if failed else ok[-1], "non_converging": failed}


_RESULT_NAME = re.compile(r"\.(txt|log)$")


def collect(paths: list[str]) -> tuple[list[Source], list[Source]]:
    """(result files, system JSON files) from files and directories (searched recursively)."""
    results, systems = [], []
    for p in paths:
        pp = Path(p)
        if pp.is_dir():
            files = sorted(f for f in pp.rglob("*") if f.is_file())
            if not files:
                raise InputError(f"{pp}: directory holds no files")
        elif pp.exists():
            files = [pp]
        else:
            raise InputError(f"{pp}: no such file or directory")
        for f in files:
            if f.suffix == ".json":
                systems.append(Source.read(f))
            elif _RESULT_NAME.search(f.name):
                results.append(Source.read(f))
            elif pp.is_file():
                raise InputError(f"{f}: expected a result log (.txt/.log with :::MLLOG lines) or a system "
                                 "description (.json)")
    if not results:
        raise InputError(f"no MLPerf result logs among {', '.join(paths)} (result_*.txt with :::MLLOG lines)")
    return results, systems


def parse_all(paths: list[str]) -> tuple[list[MlperfRun], dict[str, SystemDesc]]:
    results, systems = collect(paths)
    runs = [parse_result(s) for s in results]
    descs: dict[str, SystemDesc] = {}
    for s in systems:
        d = parse_system(s)
        descs[d.name] = d
        if isinstance(d.fields.get("system_name"), str):
            descs.setdefault(d.fields["system_name"], d)
    return runs, descs


def _fingerprint(platform: str | None, sysd: SystemDesc | None) -> dict[str, Any]:
    """The measured system as the submission describes it (never this machine's fingerprint)."""
    f = dict(sysd.fields) if sysd else {}
    return {"imported": True, "importer": IMPORTER, "system": platform,
            "gpus": [{"name": f["accelerator_model_name"]}] if f.get("accelerator_model_name") else [],
            "accelerators": sysd.accelerators if sysd else None}


def match_node_id(sysd: SystemDesc | None) -> str | None:
    """The catalog node whose ``gpu_name_contains`` matches ``accelerator_model_name`` (hyphens read as spaces too)."""
    name = str((sysd.fields if sysd else {}).get("accelerator_model_name") or "")
    if not name:
        return None
    from hwmodels.catalog import match_node

    for cand in (name, name.replace("-", " ")):
        node = match_node({"gpus": [{"name": cand}]})
        if node is not None:
            return node.id
    return None


def to_records(runs: list[MlperfRun], systems: dict[str, SystemDesc], *, run_id: str = "",
               node_id: str | None = None) -> tuple[list[Any], list[str]]:
    """One ``MlperfRecord`` per run plus one olympic-mean record per (system, benchmark); and warnings.

    ``node_id``: the catalog node of every system (default: matched from each
    system description's ``accelerator_model_name``).
    """
    from hwcore.records import MlperfRecord

    recs, warnings = [], []
    groups: dict[tuple[str, str], list[MlperfRun]] = {}
    for r in runs:
        groups.setdefault((r.platform or "", r.benchmark), []).append(r)
        sysd = systems.get(r.platform or "")
        if sysd is None and systems:
            warnings.append(f"{r.source.path}: no system description named {r.platform!r} among the JSON files")
        curve = [{"value": e.value, "epoch_num": e.epoch_num, "samples_count": e.samples_count,
                  "time_s": (e.time_ms - r.run_start_ms) / 1e3 if r.run_start_ms is not None else None}
                 for e in r.evals]
        status = "ok" if r.converged else "failed"
        err = None if r.converged else (f"run_stop status {r.run_status!r}" if r.run_stop_ms is not None
                                         else "no run_stop event (truncated log?)")
        recs.append(MlperfRecord(
            benchmark=r.benchmark, system=r.platform, aggregate="run",
            submission={k: v for k, v in r.submission.items() if k != "benchmark"},
            system_desc=dict(sysd.fields) if sysd else {}, accelerators=sysd.accelerators if sysd else None,
            time_to_train_s=r.time_to_train_s if r.converged else None, global_batch_size=r.global_batch_size,
            seed=r.seed, eval_curve=curve, run_status=r.run_status,
            provenance=r.source.provenance(IMPORTER, VERSION, r.start_line), status=status, error=err,
            fingerprint=_fingerprint(r.platform, sysd), node_id=node_id or match_node_id(sysd),
            run_id=run_id).to_record())
    for (plat, bench), rs in sorted(groups.items()):
        om = olympic_mean([r.time_to_train_s if r.converged else None for r in rs])
        need = RUNS_REQUIRED.get(bench)
        if need is not None and len(rs) != need:
            warnings.append(f"{bench} on {plat or '?'}: {len(rs)} runs, the rules ask for {need} ({RULES_SOURCE})")
        if not om["valid"]:
            warnings.append(f"{bench} on {plat or '?'}: no benchmark result: {om['reason']}")
        sysd = systems.get(plat)
        recs.append(MlperfRecord(
            benchmark=bench, system=plat or None, aggregate="olympic_mean", submission={},
            system_desc=dict(sysd.fields) if sysd else {}, accelerators=sysd.accelerators if sysd else None,
            time_to_train_s=om.get("time_to_train_s"), olympic=om,
            provenance={"importer": IMPORTER, "importer_version": VERSION, "rules": RULES_SOURCE,
                        "sources": [{"source_path": r.source.path, "source_sha256": r.source.sha256} for r in rs]},
            status="ok" if om["valid"] else "failed", error=None if om["valid"] else om["reason"],
            fingerprint=_fingerprint(plat, sysd), node_id=node_id or match_node_id(sysd),
            run_id=run_id).to_record())
    return recs, warnings
