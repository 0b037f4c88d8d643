"""Adapters over the Slurm commands: ``sbatch`` (test and submit), ``squeue``, the ``jobcomp/filetxt`` log,
``sacct``, ``scontrol show config`` and ``scancel``; each returns plain data (:class:`TaskState`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hwcore.errors import InputError
from hweval.slurm.scripts import Group

__all__ = ["ABNORMAL", "FINAL_STATUS", "PENDING_STATES", "TaskState", "jobcomp_states", "require_slurm",
           "sacct_states", "sbatch_submit", "sbatch_test", "scancel", "scontrol_config", "squeue_states"]

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


def squeue_states(job_ids: Sequence[str], *, check: bool = False) -> dict[tuple[str, int], TaskState]:
    """``{(array_job_id, task_index): TaskState}`` of every task slurmctld still knows.

    A failing ``squeue`` gives ``{}``, or with ``check`` raises ``RuntimeError``
    with its message (but not for job ids slurmctld has forgotten: those are
    simply absent).
    """
    if not job_ids:
        return {}
    res = _cmd(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(job_ids), "-o", "%F|%K|%T|%r|%N"])
    out: dict[tuple[str, int], TaskState] = {}
    if res.returncode != 0:
        if check and "invalid job id" not in (res.stderr + res.stdout).lower():
            raise RuntimeError(f"squeue failed: {_first_error_line(res.stderr + res.stdout)}")
        return out
    for line in res.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 5 or not parts[1].isdigit():
            continue
        out[(parts[0], int(parts[1]))] = TaskState(state=parts[2].split()[0], reason=parts[3], nodelist=parts[4])
    return out


_KV = re.compile(r"(\w+)=(\S*)")


def scontrol_config() -> dict[str, str]:
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


def scancel(job_ids: Sequence[str]) -> None:
    """Cancel our job arrays; a failed ``scancel`` warns (those jobs may still run), never raises."""
    if not job_ids:
        return
    try:
        _cmd(["scancel", *job_ids], timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        warnings.warn(f"scancel {' '.join(job_ids)} failed ({exc}); those jobs may still be queued or running",
                      RuntimeWarning, stacklevel=2)
