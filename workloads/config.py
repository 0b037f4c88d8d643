"""Typed, keyword-only workload configs, validated on construction.

Every workload config is a ``@dataclass(kw_only=True)`` deriving from
:class:`TrainKnobs` (the knobs every workload honours where its framework
allows). ``__post_init__`` raises :class:`~hwcore.errors.InputError` whose
message names the dotted field (``transformer_lm.heads (4) must divide width
(66)``), after torchtitan's ``JobConfig`` validation.

:func:`parse_params` turns a dict of raw strings (``--set key=value``) or typed
values into field values, rejecting unknown keys with the list of valid ones.
Every field is typed by :mod:`hwcore.params` (the one parameter type system):
its Python type plus the range in the class's ``RANGES`` (positive sizes,
finite non-negative times, known choices), so ``lr=nan`` or ``batch_size=0``
is refused with the same one-line error a plan gets
(``transformer_lm.batch_size: expected a positive integer, got 0``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, fields
from functools import cache
from typing import Any, ClassVar

from hwcore.errors import InputError
from hwcore.params import Float, Int, Str, Type, scalar

PRECISIONS = ("fp32", "bf16_autocast", "bf16")
FRAMEWORKS = ("torch", "jax")
OPTIMIZER_IMPLS = ("default", "foreach", "fused")
STRATEGIES = ("ddp", "fsdp")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(kw_only=True)
class TrainKnobs:
    """Knobs shared by every workload.

    ``batch_size`` is the *global* batch (samples per optimizer step, over all
    processes and micro-batches); each of ``nprocs`` processes takes
    ``batch_size / nprocs`` samples, split into ``grad_accum`` micro-batches.
    """

    #: workload name, used as the prefix of dotted field names in errors
    workload: ClassVar[str] = "workload"
    frameworks: ClassVar[tuple[str, ...]] = ("torch",)

    framework: str = "torch"  # torch | jax
    device: str = "auto"  # auto | cpu | cuda
    batch_size: int = 16  # global samples per optimizer step
    grad_accum: int = 1  # micro-batches per step (per process)
    precision: str = "fp32"  # fp32 | bf16_autocast | bf16 (bf16 parameters)
    activation_checkpointing: bool = False  # recompute block activations in backward
    compile: bool = False  # torch.compile / jax.jit
    optimizer_impl: str = "foreach"  # torch AdamW implementation: default | foreach | fused
    lr: float = 1e-3
    weight_decay: float = 0.0
    warmup_steps: int = 0  # linear warm-up, then constant (independent of max_steps: resumable)
    grad_clip: float = 1.0  # max global grad norm (0 = off)
    workers: int = 0  # data-loader worker processes
    seed: int = 0
    max_steps: int = 200
    max_time_s: float = 0.0  # 0 = no wall-time limit; else status timeout past it
    target_loss: float = 0.0  # eval-loss target; 0 = the workload's default target
    stop_at_target: bool = True
    eval_every: int = 10  # steps between eval-loss points
    eval_batches: int = 4  # held-out batches per eval point
    nprocs: int = 1  # data-parallel processes (torch.distributed)
    strategy: str = "ddp"  # ddp | fsdp
    overlap_comm: bool = True  # ddp: overlap all-reduce with backward (else time it apart)
    sync_phases: bool = True  # on GPU: synchronize at each phase boundary (else the breakdown is async dispatch time)
    peak_flops_per_s: float = 0.0  # measured peak of the devices used (0 = none)
    checkpoint_every: int = 0  # steps between checkpoints (0 = off)
    checkpoint_dir: str = ""  # where checkpoints go (default: a temp dir)
    resume_from: str = ""  # checkpoint directory to resume from
    inject_nan_at_step: int = 0  # testing: make the loss NaN at this step (0 = never)
    threads: int = 0  # torch intra-op threads (0 = leave as is)

    #: per-field ranges (:mod:`hwcore.params`); subclasses add theirs, fields not listed take their plain type
    RANGES: ClassVar[dict[str, Type]] = {
        "framework": Str(choices=FRAMEWORKS),
        "device": Str(choices=DEVICES),
        "precision": Str(choices=PRECISIONS),
        "optimizer_impl": Str(choices=OPTIMIZER_IMPLS),
        "strategy": Str(choices=STRATEGIES),
        **{n: Int(min=1) for n in ("batch_size", "grad_accum", "max_steps", "eval_every", "eval_batches", "nprocs")},
        **{n: Int(min=0) for n in ("warmup_steps", "workers", "seed", "checkpoint_every", "inject_nan_at_step",
                                   "threads")},
        "lr": Float(min=0, min_open=True),
        "weight_decay": Float(min=0),
        "grad_clip": Float(min=0),
        "max_time_s": Float(min=0, unit="seconds"),
        "target_loss": Float(min=0),
        "peak_flops_per_s": Float(min=0),
    }

    # -- validation ---------------------------------------------------------------
    def _err(self, msg: str) -> InputError:
        return InputError(f"{self.workload}.{msg}")

    def __post_init__(self) -> None:
        _check_types(self)
        if self.framework not in self.frameworks:
            raise self._err(
                f"framework: {self.framework!r} is not implemented for this workload; valid choices: "
                + ", ".join(self.frameworks)
            )
        per_rank, rem = divmod(self.batch_size, self.nprocs)
        if rem:
            raise self._err(f"batch_size ({self.batch_size}) must be divisible by nprocs ({self.nprocs})")
        if per_rank % self.grad_accum:
            raise self._err(
                f"grad_accum ({self.grad_accum}) must divide the per-process batch "
                f"(batch_size / nprocs = {per_rank})"
            )
        if self.strategy == "fsdp" and self.nprocs > 1 and (self.checkpoint_every or self.resume_from):
            raise self._err("checkpoint_every: checkpointing is not implemented for strategy=fsdp "
                            "(sharded state); use strategy=ddp")
        if self.framework == "jax":
            if self.nprocs > 1:
                raise self._err("nprocs: data-parallel over processes is implemented for framework=torch only")
            if self.optimizer_impl == "fused":
                raise self._err("optimizer_impl: 'fused' is a torch AdamW option; jax uses optax.adamw")
            if self.workers:
                raise self._err("workers: data-loader workers are a torch DataLoader option")

    # -- helpers ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def micro_batch(self) -> int:
        return self.batch_size // self.nprocs // self.grad_accum


# ---------------------------------------------------------------------------------
# parsing raw parameters
# ---------------------------------------------------------------------------------


def _base_type(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return tp


def field_types(cls: type) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    return {f.name: _base_type(hints[f.name]) for f in fields(cls)}


@cache
def field_specs(cls: type) -> dict[str, Type]:
    """``{field: hwcore.params.Type}``: each field's Python type with the ``RANGES`` of ``cls`` and its bases."""
    ranges: dict[str, Type] = {}
    for klass in reversed(cls.__mro__):
        ranges.update(vars(klass).get("RANGES", {}))
    return {name: ranges.get(name) or scalar(tp) for name, tp in field_types(cls).items()}


def _check_types(cfg: Any) -> None:
    for name, spec in field_specs(type(cfg)).items():
        val = spec.parse(getattr(cfg, name), f"{cfg.workload}.{name}", strict=True)
        object.__setattr__(cfg, name, val)


def coerce(workload: str, name: str, tp: type, raw: Any, spec: Type | None = None) -> Any:
    """``raw`` (a string from ``--set`` or a typed value) as ``tp``; error names the field."""
    return (spec or scalar(tp)).parse(raw, f"{workload}.{name}")


def parse_params(cls: type, raw: dict[str, Any], *, base: dict[str, Any] | None = None) -> Any:
    """Build ``cls`` from ``base`` (a preset's fields) updated with ``raw``."""
    types_ = field_types(cls)
    specs = field_specs(cls)
    values = dict(base or {})
    for key, val in raw.items():
        if key not in types_:
            raise InputError(
                f"{cls.workload}: unknown parameter {key!r}; valid parameters: preset, " + ", ".join(sorted(types_))
            )
        values[key] = coerce(cls.workload, key, types_[key], val, specs[key])
    return cls(**values)
