"""The Slurm backend of ``hweval run --backend slurm``: plan cells as Slurm job arrays.

Each plan cell becomes one Slurm array task; cells that share a node type (and
so the node entry's ``slurm:`` mapping and time limit) go into one job array,
submitted with ``sbatch`` on the partition / constraint / GRES the plan names.
Every task runs ``python -m hweval.runner --plan FILE --cell CELL_ID ...``,
which executes the notebook and appends its records to the shared store
(append-only Parquet parts, so concurrent jobs never collide). The array index
-> cell id mapping is the file ``cells.txt`` written beside the job script in
``OUT/slurm/<run_id>/<group>/``; task logs go to ``logs/%A_%a.out`` there.

The submitting process waits with a rich progress bar and polls job states:
``squeue -t all`` while slurmctld remembers the job (``MinJobAge``), then the
``jobcomp/filetxt`` completion log when the cluster writes one, then ``sacct``
where accounting runs. When a task reaches a final state the poller checks the
store; it appends a notebook record itself when

* Slurm ended the task abnormally (``TIMEOUT`` -> ``timeout``, ``PREEMPTED`` ->
  ``preempted``, ``OUT_OF_MEMORY`` -> ``oom``, ``CANCELLED`` / ``NODE_FAIL`` /
  ``BOOT_FAIL`` / ... -> ``failed``), the Slurm state and exit code in
  ``error``; this record is the cell's latest, whatever the killed runner wrote;
* or the task ended (``COMPLETED`` / ``FAILED``) without a record of this run
  (the job died before writing anything): ``failed``.

So ``--resume`` (the runner's ``select_cells``) resubmits exactly the failed,
timed-out, preempted and missing cells.

The mapping a node entry may carry (validated here; unknown keys are an
:class:`~hwcore.errors.InputError` listing the valid ones)::

    slurm:
      partition: gpu-h100        # --partition
      constraint: h100&ib        # --constraint (node features)
      gres: gpu:8                # --gres
      account: proj123           # --account
      qos: normal                # --qos
      time_limit_min: 30         # --time, minutes (default: from the cell timeout)
      nodes: 2                   # --nodes
      ntasks: 16                 # --ntasks (ranks of a multi-process cell)
      ntasks_per_node: 8         # --ntasks-per-node
      cpus_per_task: 12          # --cpus-per-task
      mem_gb: 64                 # --mem, per node, GiB
      launcher: srun             # multi-rank launch: srun (one rank per task) or torchrun (one agent per node)
      ranks_param: nprocs        # per cell: ntasks = the cell's value of this notebook parameter
                                 # (nodes = ceil(ntasks / ntasks_per_node) when ntasks_per_node is set),
                                 # so a grid over nprocs becomes 1-, 2-, 4-, ... rank jobs
      max_parallel: 4            # array throttle: at most N tasks of this array at once (--array=0-9%4)
      extra_args: ["--exclusive"]   # more sbatch options, passed verbatim

Multi-process cells (``ntasks``, ``nodes`` or ``ntasks_per_node`` > 1): the job script sets
``MASTER_ADDR`` (first host of ``$SLURM_JOB_NODELIST``), ``MASTER_PORT`` (from
the job id) and launches every rank with ``srun`` (``RANK`` =
``$SLURM_PROCID``, ``WORLD_SIZE`` = ``$SLURM_NTASKS``, ``LOCAL_RANK`` =
``$SLURM_LOCALID``: torch.distributed's ``env://`` contract) or with
``torchrun`` under ``srun --ntasks-per-node=1`` (c10d rendezvous at
``MASTER_ADDR:MASTER_PORT``). Every rank executes the notebook; rank 0 writes
to the shared store and the run's notebook directory, the other ranks to a
per-rank side store under the group folder, so the shared store holds one set
of records per cell.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcore.errors import InputError, choices_error
from hwcore.params import Float, Int, Optional, Str
from hwcore.records import CellRecord
from hwcore.store import Record, Store

#: Seconds the Slurm limit adds to a cell's own timeout when ``time_limit_min``
#: is not given: interpreter + kernel start-up, papermill conversion and the
#: runner's kill grace (5 s), measured at < 15 s on a loaded 2-core node; 60 s
#: leaves room for a slow shared filesystem. The runner enforces the cell's
#: timeout itself (recorded ``timeout``); Slurm's limit is the backstop.
STARTUP_MARGIN_S = 60.0
#: Seconds between polls (``HWEVAL_SLURM_POLL_S`` overrides).
POLL_S = 2.0
#: Seconds a finished task's record may take to become visible in the store
#: (shared-filesystem attribute caching, e.g. NFS ``actimeo`` defaults to 3-60 s)
#: before the poller records the task as having written nothing
#: (``HWEVAL_SLURM_RECORD_GRACE_S`` overrides).
RECORD_GRACE_S = 10.0
#: Polls a task may be missing from every state source before it counts as lost.
LOST_AFTER_POLLS = 5

LAUNCHERS = ("srun", "torchrun")
SPEC_KEYS = (
    "partition",
    "constraint",
    "gres",
    "account",
    "qos",
    "time_limit_min",
    "nodes",
    "ntasks",
    "ntasks_per_node",
    "cpus_per_task",
    "mem_gb",
    "launcher",
    "ranks_param",
    "max_parallel",
    "extra_args",
)
#: sbatch options the backend sets itself; ``extra_args`` may not override them.
MANAGED_OPTIONS = ("--array", "--output", "--error", "--job-name", "--wrap", "--parsable", "-a", "-o", "-e", "-J")

PENDING_STATES = {
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
    "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD",
}
#: Final Slurm state -> store status (Slurm's JOB STATE CODES, ``man squeue``).
FINAL_STATUS = {
    "COMPLETED": "ok",
    "FAILED": "failed",
    "CANCELLED": "failed",
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "PREEMPTED": "preempted",
    "OUT_OF_MEMORY": "oom",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "SPECIAL_EXIT": "failed",
    "REVOKED": "failed",
    "LOST": "failed",  # hweval's own: vanished from squeue, jobcomp and sacct
}
#: Final states the poller always records itself (Slurm killed the task).
ABNORMAL = {"CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL",
            "SPECIAL_EXIT", "REVOKED", "LOST"}


# -- the node entry's slurm mapping ------------------------------------------------------
#: the mapping's value types (:mod:`hwcore.params`, strict: YAML values, no text spellings)
_POS_INT = Int(min=1)
_TEXT = Optional(Str(nonempty=True, oneline=True))
_MEM_GB = Float(min=0, min_open=True, unit="GiB")


def _pos_int(value: Any, field_name: str) -> int:
    return _POS_INT.parse(value, field_name, strict=True)


def _opt_str(value: Any, field_name: str) -> str | None:
    try:
        return _TEXT.parse(value, field_name, strict=True)
    except InputError:
        raise InputError(f"{field_name}: expected a non-empty one-line string, got {value!r}") from None


@dataclass(frozen=True, kw_only=True)
class SlurmSpec:
    """Where and how a node type's cells run; built from the plan's ``slurm:`` mapping."""

    partition: str | None = None
    constraint: str | None = None
    gres: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_min: int | None = None
    nodes: int | None = None
    ntasks: int | None = None
    ntasks_per_node: int | None = None
    cpus_per_task: int | None = None
    mem_gb: float | None = None
    launcher: str = "srun"
    ranks_param: str | None = None
    max_parallel: int | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    where: str = "slurm"

    def __post_init__(self) -> None:
        w = self.where
        for name in ("partition", "constraint", "gres", "account", "qos", "ranks_param"):
            object.__setattr__(self, name, _opt_str(getattr(self, name), f"{w}.{name}"))
        for name in ("time_limit_min", "nodes", "ntasks", "ntasks_per_node", "cpus_per_task", "max_parallel"):
            val = getattr(self, name)
            if val is not None:
                _pos_int(val, f"{w}.{name}")
        if self.mem_gb is not None:
            _MEM_GB.parse(self.mem_gb, f"{w}.mem_gb", strict=True)
        if self.launcher not in LAUNCHERS:
            raise choices_error(f"{w}.launcher", self.launcher, LAUNCHERS)
        if isinstance(self.extra_args, str) or not isinstance(self.extra_args, list | tuple):
            raise InputError(f"{w}.extra_args: expected a list of sbatch options, got {self.extra_args!r}")
        for i, arg in enumerate(self.extra_args):
            if not isinstance(arg, str) or not arg.startswith("-") or "\n" in arg:
                raise InputError(f"{w}.extra_args[{i}]: expected an sbatch option such as '--exclusive', got {arg!r}")
            opt = arg.split("=", 1)[0]
            if opt in MANAGED_OPTIONS:
                raise InputError(f"{w}.extra_args[{i}]: {opt} is set by hweval; remove it")
        object.__setattr__(self, "extra_args", tuple(self.extra_args))
        if self.launcher == "torchrun" and self.ntasks is not None and self.ntasks_per_node is None and (
            self.nodes or 1
        ) > 1:
            raise InputError(f"{w}.ntasks_per_node: launcher torchrun on several nodes needs ntasks_per_node")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, *, where: str = "slurm") -> SlurmSpec:
        mapping = dict(mapping or {})
        if not isinstance(mapping, dict):
            raise InputError(f"{where}: expected a mapping, got {mapping!r}")
        for key in mapping:
            if key not in SPEC_KEYS:
                raise InputError(f"{where}.{key}: unknown key; valid keys: {', '.join(SPEC_KEYS)}")
        return cls(where=where, **mapping)

    @property
    def multi_process(self) -> bool:
        return (self.ntasks or 1) > 1 or (self.nodes or 1) > 1 or (self.ntasks_per_node or 1) > 1

    def sbatch_options(self, *, time_limit_min: int | None) -> list[str]:
        """The ``#SBATCH`` options (without the array / output / name ones)."""
        opts: list[str] = []
        for name, flag in (("partition", "--partition"), ("constraint", "--constraint"), ("gres", "--gres"),
                           ("account", "--account"), ("qos", "--qos"), ("nodes", "--nodes"),
                           ("ntasks", "--ntasks"), ("ntasks_per_node", "--ntasks-per-node"),
                           ("cpus_per_task", "--cpus-per-task")):
            val = getattr(self, name)
            if val is not None:
                opts.append(f"{flag}={val}")
        if self.mem_gb is not None:
            opts.append(f"--mem={math.ceil(self.mem_gb * 1024)}M")  # 1 GiB = 1024 MiB (Slurm's M is MiB)
        if time_limit_min is not None:
            opts.append(f"--time={time_limit_min}")
        opts.extend(self.extra_args)
        return opts


def node_spec(plan: Any, node_id: str, mapping: Mapping[str, Any] | None) -> SlurmSpec:
    """Validate one node entry's mapping, errors naming ``PLAN: nodes[i].slurm.KEY``."""
    idx = next((i for i, n in enumerate(getattr(plan, "nodes", ())) if n.id == node_id), None)
    where = f"nodes[{idx}].slurm" if idx is not None else f"node {node_id}: slurm"
    label = str(getattr(plan, "path", "") or "")
    try:
        return SlurmSpec.from_mapping(mapping, where=where)
    except TypeError as exc:  # pragma: no cover - from_mapping checks keys first
        raise InputError(f"{label}: {where}: {exc}") from exc
    except InputError as exc:
        raise InputError(f"{label}: {exc}" if label else str(exc)) from None


def validate_plan(plan: Any) -> dict[str, SlurmSpec]:
    """``{node_id: SlurmSpec}`` for every node of the plan; raises InputError on the first bad mapping."""
    return {n.id: node_spec(plan, n.id, n.slurm) for n in plan.nodes}


def time_limit_min(spec: SlurmSpec, timeouts_s: Iterable[float | None]) -> int | None:
    """``--time`` in whole minutes: ``spec.time_limit_min``, else the longest cell timeout + start-up margin."""
    if spec.time_limit_min is not None:
        return spec.time_limit_min
    ts = [t for t in timeouts_s if t]
    if not ts:
        return None
    return max(1, math.ceil((max(ts) + STARTUP_MARGIN_S) / 60.0))


# -- job scripts ----------------------------------------------------------------------------
@dataclass(kw_only=True)
class Group:
    """One job array: cells of one node type with one spec and time limit."""

    name: str
    node: str
    spec: SlurmSpec
    time_limit_min: int | None
    cells: list[Any]
    dir: Path
    job_id: str | None = None

    @property
    def script(self) -> Path:
        return self.dir / "job.sh"

    @property
    def rank_script(self) -> Path:
        return self.dir / "rank.sh"

    @property
    def cells_file(self) -> Path:
        return self.dir / "cells.txt"

    def log(self, index: int) -> Path:
        return self.dir / "logs" / f"{self.job_id}_{index}.out"


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def python_executable() -> str:
    """The interpreter jobs use: ``$HWEVAL_SLURM_PYTHON`` or this one (a venv on a shared filesystem)."""
    return os.environ.get("HWEVAL_SLURM_PYTHON") or sys.executable


def render_job_script(group: Group, *, plan_path: Path, plan_name: str, notebooks_out: Path, store_path: Path,
                      run_id: str, workdir: Path, python: str) -> tuple[str, str | None]:
    """``(job script, rank script or None)`` of one group; the array index selects a line of ``cells.txt``."""
    q = shlex.quote
    n = len(group.cells)
    array = f"0-{n - 1}" + (f"%{group.spec.max_parallel}" if group.spec.max_parallel else "")
    head = [
        "#!/bin/bash",
        f"#SBATCH --job-name={_SAFE.sub('_', f'hweval-{plan_name}-{group.node}')[:100]}",
        f"#SBATCH --array={array}",
        f"#SBATCH --output={group.dir / 'logs' / '%A_%a.out'}",
        "#SBATCH --open-mode=append",
        *(f"#SBATCH {opt}" for opt in group.spec.sbatch_options(time_limit_min=group.time_limit_min)),
    ]
    runner = f"{q(python)} -m hweval.runner --plan {q(str(plan_path))} --run-id {q(run_id)}"
    body = f"""
# generated by hweval.slurm: plan {plan_name}, node {group.node}, run {run_id}, {n} cell(s)
set -uo pipefail
CELL_ID=$(sed -n "$((SLURM_ARRAY_TASK_ID + 1))p" {q(str(group.cells_file))})
if [ -z "$CELL_ID" ]; then echo "hweval: no cell for array index $SLURM_ARRAY_TASK_ID" >&2; exit 3; fi
echo "hweval: cell $CELL_ID on $(hostname) job ${{SLURM_JOB_ID}} (array ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}})"
export HWEVAL_STORE={q(str(store_path))} HWEVAL_RUN_ID={q(run_id)} HWEVAL_PLAN={q(plan_name)}
export HWEVAL_SLURM_JOB="${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
# one port per job: 20000 + job id mod 20000 (below the Linux ephemeral range 32768-60999)
export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
export WORLD_SIZE=${{SLURM_NTASKS:-1}}
cd {q(str(workdir))}
"""
    rank_text = None
    if not group.spec.multi_process:
        body += f'exec {runner} --cell "$CELL_ID" --out {q(str(notebooks_out))} --store {q(str(store_path))}\n'
    else:
        rank = group.rank_script
        side = group.dir / "ranks"
        rank_text = (
            f"""#!/bin/bash
# one rank of a multi-process cell; RANK from torchrun, else from srun's SLURM_PROCID
set -uo pipefail
CELL_ID=$1
export RANK=${{RANK:-$SLURM_PROCID}} LOCAL_RANK=${{LOCAL_RANK:-${{SLURM_LOCALID:-0}}}}
export WORLD_SIZE=${{WORLD_SIZE:-$SLURM_NTASKS}}
export HWEVAL_LAUNCHER={"slurm" if group.spec.launcher == "srun" else "torchrun"}
if [ "$RANK" = 0 ]; then
  STORE={q(str(store_path))}; OUT={q(str(notebooks_out))}
else  # ranks > 0 keep their records apart: the shared store gets one record set per cell
  STORE={q(str(side))}/$SLURM_JOB_ID/rank-$RANK/store; OUT={q(str(side))}/$SLURM_JOB_ID/rank-$RANK/notebooks
fi
export HWEVAL_STORE=$STORE
exec {runner} --cell "$CELL_ID" --out "$OUT" --store "$STORE"
"""
        )
        if group.spec.launcher == "srun":
            body += (
                "unset RANK LOCAL_RANK\n"
                f'exec srun --kill-on-bad-exit=1 --ntasks="$SLURM_NTASKS" bash {q(str(rank))} "$CELL_ID"\n'
            )
        else:
            per_node = group.spec.ntasks_per_node or group.spec.ntasks or 1
            body += (
                "unset RANK LOCAL_RANK WORLD_SIZE\n"
                f'exec srun --kill-on-bad-exit=1 --ntasks="$SLURM_NNODES" --ntasks-per-node=1 '
                f'{q(python)} -m torch.distributed.run --nnodes="$SLURM_NNODES" --nproc-per-node={per_node} '
                '--rdzv-id="$SLURM_JOB_ID" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" '
                f'--no-python bash {q(str(rank))} "$CELL_ID"\n'
            )
    return "\n".join(head) + "\n" + body, rank_text


# -- Slurm commands ---------------------------------------------------------------------------
def _cmd(args: Sequence[str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def require_slurm() -> None:
    for tool in ("sbatch", "squeue", "scancel", "scontrol"):
        if shutil.which(tool) is None:
            raise InputError(
                f"--backend slurm: {tool} not found on PATH (run on a Slurm login node, or install slurm-client "
                "and set SLURM_CONF)"
            )


def _first_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or ["(no message)"])[0]


def sbatch_test(group: Group, script: str) -> None:
    """``sbatch --test-only``: Slurm validates partition / constraint / GRES without submitting."""
    res = subprocess.run(["sbatch", "--test-only"], input=script, capture_output=True, text=True, timeout=60)
    if res.returncode != 0:
        raise InputError(f"node {group.node}: sbatch rejected the job ({group.spec.where}): "
                         f"{_first_error_line(res.stderr + res.stdout)}")


def sbatch_submit(group: Group) -> str:
    res = _cmd(["sbatch", "--parsable", str(group.script)])
    if res.returncode != 0:
        raise RuntimeError(f"sbatch failed for node {group.node}: {_first_error_line(res.stderr + res.stdout)}")
    return res.stdout.strip().split(";")[0]


@dataclass
class TaskState:
    state: str
    exit_code: str | None = None
    reason: str | None = None
    nodelist: str | None = None
    source: str = "squeue"


def squeue_states(job_ids: Sequence[str]) -> dict[tuple[str, int], TaskState]:
    """``{(array_job_id, task_index): TaskState}`` of every task slurmctld still knows."""
    if not job_ids:
        return {}
    res = _cmd(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%F|%K|%T|%r|%N"])
    out: dict[tuple[str, int], TaskState] = {}
    if res.returncode != 0:
        return out
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 5 or not parts[1].isdigit():
            continue
        out[(parts[0], int(parts[1]))] = TaskState(state=parts[2].split()[0], reason=parts[3], nodelist=parts[4])
    return out


_KV = re.compile(r"(\w+)=(\S*)")


def _scontrol_config() -> dict[str, str]:
    res = _cmd(["scontrol", "show", "config"])
    conf: dict[str, str] = {}
    if res.returncode == 0:
        for line in res.stdout.splitlines():
            key, sep, val = line.partition("=")
            if sep:
                conf[key.strip()] = val.strip()
    return conf


def jobcomp_states(path: Path, job_ids: set[str]) -> dict[tuple[str, int], TaskState]:
    """Final states from a ``jobcomp/filetxt`` log (one ``Key=Value`` line per finished job)."""
    out: dict[tuple[str, int], TaskState] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        kv = dict(_KV.findall(line))
        arr, idx = kv.get("ArrayJobId"), kv.get("ArrayTaskId")
        if arr in job_ids and idx and idx.isdigit():
            out[(arr, int(idx))] = TaskState(state=kv.get("JobState", "UNKNOWN"), exit_code=kv.get("ExitCode"),
                                             nodelist=kv.get("NodeList"), source="jobcomp")
    return out


def sacct_states(job_ids: Sequence[str]) -> dict[tuple[str, int], TaskState]:
    """Final states from accounting (``sacct``), where the cluster runs slurmdbd."""
    out: dict[tuple[str, int], TaskState] = {}
    if not job_ids or shutil.which("sacct") is None:
        return out
    res = _cmd(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,ExitCode,NodeList"])
    if res.returncode != 0:
        return out
    for line in res.stdout.splitlines():
        parts = line.split("|")
        if len(parts) < 4:
            continue
        m = re.fullmatch(r"(\d+)_(\d+)", parts[0])
        if m:
            out[(m.group(1), int(m.group(2)))] = TaskState(state=parts[1].split()[0], exit_code=parts[2],
                                                           nodelist=parts[3], source="sacct")
    return out


class StatePoller:
    """Task states of our arrays from squeue, then the jobcomp log, then sacct."""

    def __init__(self, job_ids: Sequence[str]) -> None:
        self.job_ids = list(job_ids)
        conf = _scontrol_config()
        loc = conf.get("JobCompLoc", "")
        self.jobcomp = Path(loc) if conf.get("JobCompType", "").endswith("filetxt") and loc else None
        self.accounting = conf.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none"

    def poll(self, wanted: set[tuple[str, int]]) -> dict[tuple[str, int], TaskState]:
        states = squeue_states(self.job_ids)
        missing = {k for k in wanted if k not in states}
        if missing and self.jobcomp is not None:
            states.update({k: v for k, v in jobcomp_states(self.jobcomp, {k[0] for k in missing}).items()
                           if k in missing})
            missing = {k for k in wanted if k not in states}
        if missing and self.accounting:
            states.update({k: v for k, v in sacct_states(sorted({k[0] for k in missing})).items() if k in missing})
        return states


def scancel(job_ids: Sequence[str]) -> None:
    if job_ids:
        with contextlib.suppress(Exception):
            _cmd(["scancel", *job_ids], timeout=30)


# -- the backend ---------------------------------------------------------------------------------
def _store_path(store: Store | str | os.PathLike[str] | None) -> Path:
    st = store if isinstance(store, Store) else Store(store)
    return Path(st.path).resolve()


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise InputError(f"{name}: expected a number of seconds, got {os.environ.get(name)!r}") from None


def cell_spec(spec: SlurmSpec, cell: Any) -> SlurmSpec:
    """The node's spec with ``ntasks`` (and ``nodes``) taken from the cell's ``ranks_param`` value."""
    if spec.ranks_param is None or spec.ranks_param not in (cell.params or {}):
        return spec
    ranks = cell.params[spec.ranks_param]
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise InputError(f"cell {cell.cell_id}: params.{spec.ranks_param} (the {spec.where}.ranks_param): "
                         f"expected a positive integer number of ranks, got {ranks!r}")
    nodes = math.ceil(ranks / spec.ntasks_per_node) if spec.ntasks_per_node else spec.nodes
    per_node = min(spec.ntasks_per_node, ranks) if spec.ntasks_per_node else None
    return replace(spec, ntasks=ranks, nodes=nodes, ntasks_per_node=per_node)


def make_groups(plan: Any, cells: Sequence[Any], base: Path) -> list[Group]:
    """One group (job array) per node type x effective spec x time limit, in plan order."""
    specs = validate_plan(plan)
    by_key: dict[tuple[str, SlurmSpec, int | None], list[Any]] = {}
    for c in cells:
        spec = cell_spec(specs.get(c.node) or node_spec(plan, c.node, c.slurm), c)
        by_key.setdefault((c.node, spec, time_limit_min(spec, [c.timeout_s])), []).append(c)
    groups = []
    for i, ((node, spec, tlim), gcells) in enumerate(by_key.items()):
        name = _SAFE.sub("_", f"{i:02d}-{node}")
        groups.append(Group(name=name, node=node, spec=spec, time_limit_min=tlim, cells=gcells, dir=base / name))
    return groups


def _record_for(cell: Any, *, plan_name: str, run_id: str, status: str, error: str, job: str,
                state: TaskState, notebooks_out: Path, submitted_at: datetime) -> Record:
    import socket

    return CellRecord(
        cell_id=cell.cell_id,
        notebook_name=cell.notebook,
        node=cell.node,
        parameters=cell.params,
        output=str(notebooks_out / f"{cell.cell_id}.ipynb"),
        is_report=False,
        slurm_job=job,
        slurm_state=state.state,
        timeout_s=cell.timeout_s,
        status=status,
        error=error,
        run_id=run_id,
        plan=plan_name,
        notebook=cell.notebook,
        started_at=submitted_at,
        finished_at=datetime.now(UTC),
        # the compute node's fingerprint is unknown here: name where the job ran and who recorded it
        fingerprint={"node_id": None, "slurm_nodelist": state.nodelist,
                     "recorded_by": f"hweval.slurm poller on {socket.gethostname()}"},
    ).to_record()


def run_plan(
    plan: Any,
    cells: Sequence[Any],
    *,
    out_dir: str | os.PathLike[str],
    store: Store | str | os.PathLike[str] | None,
    run_id: str,
    resume: bool = False,
    force: bool = False,
    progress: bool = True,
    poll_s: float | None = None,
) -> dict[str, str]:
    """Submit ``cells`` (already selected by the runner's resume/force rules) as job arrays and wait.

    Returns ``{cell_id: status}`` once every task has finished and has a
    notebook record of this run in the store. ``resume``/``force`` are
    accepted for the caller's contract; the selection is made by the caller.
    Raises :class:`InputError` (nothing submitted, nothing written) for a bad
    ``slurm:`` mapping or a job ``sbatch --test-only`` refuses (unknown
    partition, constraint, GRES). A group sbatch then refuses to queue (a
    submit limit) is recorded ``failed`` with sbatch's message; the others run.
    """
    del resume, force  # the caller (hweval run) selects the cells with hweval.runner.select_cells
    from hweval.runner import cell_states

    out = Path(out_dir).resolve()
    store_path = _store_path(store)
    st = Store(store_path)
    poll = poll_s if poll_s is not None else _env_float("HWEVAL_SLURM_POLL_S", POLL_S)
    grace = _env_float("HWEVAL_SLURM_RECORD_GRACE_S", RECORD_GRACE_S)
    base = out / "slurm" / run_id
    notebooks_out = out / "runs" / run_id
    groups = make_groups(plan, cells, base)  # validates every node's mapping first
    require_slurm()
    python = python_executable()
    plan_path = Path(plan.path).resolve()
    from hweval.plan import REPO

    workdir = REPO  # the checkout (on a shared filesystem) the jobs import hweval from

    # render every script and have Slurm check it before anything is written or submitted
    scripts: dict[str, tuple[str, str | None]] = {}
    for g in groups:
        scripts[g.name] = render_job_script(g, plan_path=plan_path, plan_name=plan.name, notebooks_out=notebooks_out,
                                            store_path=store_path, run_id=run_id, workdir=workdir, python=python)
        sbatch_test(g, scripts[g.name][0])

    submitted_at = datetime.now(UTC)
    notebooks_out.mkdir(parents=True, exist_ok=True)
    tasks: dict[tuple[str, int], tuple[Group, Any]] = {}
    refused: list[Record] = []
    try:
        for g in groups:
            (g.dir / "logs").mkdir(parents=True, exist_ok=True)
            g.cells_file.write_text("".join(f"{c.cell_id}\n" for c in g.cells))
            job_text, rank_text = scripts[g.name]
            if rank_text is not None:
                g.rank_script.write_text(rank_text)
                g.rank_script.chmod(0o755)
            g.script.write_text(job_text)
            try:
                g.job_id = sbatch_submit(g)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                # e.g. a submit limit (QOSMaxSubmitJobPerUserLimit) hit after --test-only passed: these cells
                # failed to start; record them and go on with the other groups
                refused.extend(_record_for(c, plan_name=plan.name, run_id=run_id, status="failed", error=str(exc),
                                           job="", state=TaskState(state="NOT_SUBMITTED", source="sbatch"),
                                           notebooks_out=notebooks_out, submitted_at=submitted_at)
                               for c in g.cells)
                continue
            (g.dir / "job_id").write_text(g.job_id + "\n")
            for i, c in enumerate(g.cells):
                tasks[(g.job_id, i)] = (g, c)
    except BaseException:
        scancel([g.job_id for g in groups if g.job_id])
        raise
    if refused:
        st.append(refused)

    statuses = {r.params["cell_id"]: r.status for r in refused}
    statuses |= _wait(tasks, plan=plan, st=st, run_id=run_id, poll_s=poll, grace_s=grace,
                     notebooks_out=notebooks_out, submitted_at=submitted_at, progress=progress,
                     cell_states=cell_states)
    return statuses


def _wait(tasks, *, plan, st, run_id, poll_s, grace_s, notebooks_out, submitted_at, progress, cell_states):
    if not tasks:
        return {}
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    job_ids = sorted({k[0] for k in tasks})
    poller = StatePoller(job_ids)
    console = Console(stderr=True)
    console.print(f"slurm: submitted {len(tasks)} cell(s) as job array(s) {', '.join(job_ids)}")
    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"), console=console, disable=not progress,
    )
    statuses: dict[str, str] = {}
    finished_at: dict[tuple[str, int], float] = {}  # when the task's final state was first seen
    final: dict[tuple[str, int], TaskState] = {}
    missing_polls: dict[tuple[str, int], int] = {}
    seen: set[tuple[str, int]] = set()
    try:
        with bar:
            bar_task = bar.add_task(f"slurm {plan.name}", total=len(tasks), info="")
            while len(statuses) < len(tasks):
                open_keys = {k for k in tasks if tasks[k][1].cell_id not in statuses}
                states = poller.poll(open_keys)
                counts: dict[str, int] = {}
                reasons: set[str] = set()
                for k in open_keys:
                    s = states.get(k)
                    if s is None:
                        if k in seen:
                            missing_polls[k] = missing_polls.get(k, 0) + 1
                            if missing_polls[k] >= LOST_AFTER_POLLS:
                                s = TaskState(state="LOST", source="poller")
                        if s is None:
                            counts["UNKNOWN"] = counts.get("UNKNOWN", 0) + 1
                            continue
                    seen.add(k)
                    if s.state in PENDING_STATES:
                        counts[s.state] = counts.get(s.state, 0) + 1
                        if s.state == "PENDING" and s.reason and s.reason != "None":
                            reasons.add(s.reason)  # e.g. Resources, Priority, ReqNodeNotAvail
                        continue
                    final[k] = s
                    finished_at.setdefault(k, time.monotonic())
                done_now = [k for k in open_keys if k in final]
                if done_now:
                    recs = cell_states(st, plan.name)
                    new_records = []
                    for k in done_now:
                        g, c = tasks[k]
                        s = final[k]
                        rec = recs.get(c.cell_id)
                        mine = rec is not None and rec.get("run_id") == run_id
                        job = f"{k[0]}_{k[1]}"
                        where = f"slurm job {job} ended {s.state}" + (f" (exit {s.exit_code})" if s.exit_code else "")
                        log = g.log(k[1])
                        if s.state in ABNORMAL:
                            status = FINAL_STATUS.get(s.state, "failed")
                            error = f"{where}; log: {log}"
                            if mine and rec.get("error"):
                                error += f"; runner said: {rec['error'].splitlines()[0]}"
                        elif mine:
                            statuses[c.cell_id] = rec["status"]
                            continue
                        elif time.monotonic() - finished_at[k] < grace_s:
                            continue  # the record may not be visible yet on a shared filesystem
                        else:
                            status = "failed"
                            error = f"{where} without writing a result; log: {log}\n{_tail(log)}"
                        new_records.append(_record_for(c, plan_name=plan.name, run_id=run_id, status=status,
                                                       error=error, job=job, state=s, notebooks_out=notebooks_out,
                                                       submitted_at=submitted_at))
                        statuses[c.cell_id] = status
                    if new_records:
                        st.append(new_records)
                info = " ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
                if reasons:
                    info += f" (pending: {', '.join(sorted(reasons))})"
                bar.update(bar_task, completed=len(statuses), info=info)
                if len(statuses) < len(tasks):
                    time.sleep(poll_s)
    except KeyboardInterrupt:
        # cancel what is still queued or running so no orphaned job writes later; the poller is gone,
        # so record them here (the resume picks them up)
        scancel(job_ids)
        recs = []
        for k, (g, c) in tasks.items():
            if c.cell_id not in statuses:
                recs.append(_record_for(c, plan_name=plan.name, run_id=run_id, status="failed",
                                        error=f"slurm job {k[0]}_{k[1]} cancelled: hweval run interrupted",
                                        job=f"{k[0]}_{k[1]}", state=TaskState(state="CANCELLED", source="hweval"),
                                        notebooks_out=notebooks_out, submitted_at=submitted_at))
        with contextlib.suppress(Exception):
            st.append(recs)
        raise
    return statuses


def _tail(path: Path, n: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""
