"""The node entry's ``slurm:`` mapping: :class:`SlurmSpec` (validated on construction), per-node and per-cell specs.

Unknown keys are an :class:`~hwcore.errors.InputError` listing the valid ones;
errors name ``PLAN: nodes[i].slurm.KEY``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hwcore.errors import InputError, choices_error
from hwcore.params import Float, Int, Optional, Str

__all__ = ["LAUNCHERS", "MANAGED_OPTIONS", "SPEC_KEYS", "STARTUP_MARGIN_S", "SlurmSpec", "cell_spec", "node_spec",
           "time_limit_min", "validate_plan"]

#: Seconds the Slurm limit adds to a cell's own timeout when ``time_limit_min``
#: is not given: interpreter + kernel start-up, papermill conversion and the
#: runner's kill grace (5 s), measured at < 15 s on a loaded 2-core node; 60 s
#: leaves room for a slow shared filesystem. The runner enforces the cell's
#: timeout itself (recorded ``timeout``); Slurm's limit is the backstop.
STARTUP_MARGIN_S = 60.0

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
