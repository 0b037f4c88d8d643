"""The declared training job: what a buyer will train, at the scale they will train it.

A plan's ``job:`` section (and ``hweval cost --plan``) declares it::

    job:
      model: llama2-7b              # a preset of hwmodels.predict.spec, or "d_model=4096,n_layers=32,..."
      tokens: 1.0e12                # training tokens ...
      # target_loss: 2.1            # ... or a final loss (nats/token): tokens from the scaling law
      global_batch: 1024            # sequences per optimizer step (default: ~4M tokens)
      seq_len: 4096                 # optional; overrides the preset's
      precision: bf16               # bf16 | fp8 | fp16 | fp32
      accelerators: [256, 512, 1024]  # counts to compare ...
      deadline_days: 30             # ... and/or a deadline (counts from a ladder when none are given: 8..4096
                                    # H100-equivalents of dense bf16 peak per node type, ladder_counts)
      budget_usd: 2.0e6             # optional budget ("fastest within budget")
      pricing: [on_demand, reserved, spot]
      level: 0.9                    # interval level
      framework: megatron           # optional: the framework family the job will run (hweval predict --framework);
                                    # its fitted factors and its narrower validated band (default: unknown)

Every error is one line naming the dotted field (``job.tokens: ...``) and the
valid choices; :func:`parse_job` is the only reader, :meth:`Job.to_dict` the
only writer (the runner hands it to the report notebook as its ``job``
parameter).

**Tokens from a target loss** (:func:`job_tokens`): the Chinchilla-form law
``L(N, D) = E + A/N^alpha + B/D^beta`` of :mod:`hwmodels.scaling_law`, with
the published coefficients of Besiroglu et al. 2024 (arXiv:2404.10102, the
replication of Hoffmann et al. 2022) by default, or coefficients fitted from
the plan's own runs when it has runs at three or more model sizes
(:class:`hwmodels.scaling_law.ChinchillaFit`); the law's interval is carried
into the cost interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hwcore.errors import InputError
from hwmodels.catalog import MODES as PRICING_MODES  # the catalog's one pricing vocabulary
from hwmodels.dtypes import PREDICT_PRECISIONS as PRECISIONS  # hwmodels.predict's precisions

KEYS = ("model", "tokens", "target_loss", "global_batch", "seq_len", "precision", "accelerators", "deadline_days",
        "budget_usd", "pricing", "level", "framework")
#: accelerator counts tried when the job gives a deadline or budget instead of counts, in accelerators of
#: LADDER_REFERENCE; every other node type is tried at the counts with the same aggregate peak (:func:`ladder_counts`)
COUNT_LADDER = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
#: the catalog id whose accelerators COUNT_LADDER counts
LADDER_REFERENCE = "h100-sxm"


@dataclass(frozen=True, kw_only=True)
class Job:
    """A declared training job (module docstring); validated on construction by :func:`parse_job`."""

    model: str
    tokens: float | None = None
    target_loss: float | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    precision: str = "bf16"
    accelerators: tuple[int, ...] = ()
    deadline_days: float | None = None
    budget_usd: float | None = None
    pricing: tuple[str, ...] = ("on_demand", "reserved", "spot")
    level: float = 0.9
    framework: str | None = None

    def spec(self):
        """The :class:`hwmodels.predict.spec.ModelSpec` (with ``seq_len`` applied)."""
        from hwmodels.predict.spec import parse_spec

        return parse_spec(self.model).with_seq_len(self.seq_len)

    @property
    def counts(self) -> tuple[int, ...]:
        """The counts asked for, else the ladder in the reference's accelerators (:data:`LADDER_REFERENCE`)."""
        return self.accelerators or COUNT_LADDER

    def counts_for(self, node: Any, reference_flops: float | None) -> tuple[int, ...]:
        """The counts to price ``node`` at: those asked for, else :func:`ladder_counts`."""
        return self.accelerators or ladder_counts(node, reference_flops)

    def describe(self) -> str:
        """``llama2-7b on 1T tokens`` (or ``... to loss 2.1``)."""
        what = f"{_short_count(self.tokens)} tokens" if self.tokens is not None else f"loss {self.target_loss:g}"
        return f"{self.model} on {what}" if self.tokens is not None else f"{self.model} to {what}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "precision": self.precision, "pricing": list(self.pricing),
                               "level": self.level}
        for k in ("tokens", "target_loss", "global_batch", "seq_len", "deadline_days", "budget_usd", "framework"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.accelerators:
            out["accelerators"] = list(self.accelerators)
        return out


def ladder_counts(node: Any, reference_flops: float | None) -> tuple[int, ...]:
    """:data:`COUNT_LADDER` as counts of ``node``'s accelerators with the same aggregate dense bf16 peak.

    The ladder counts accelerators of :data:`LADDER_REFERENCE` (``reference_flops``: its dense bf16 peak per
    accelerator). Accelerators differ tenfold in size (a trn1 NeuronCore is a tenth of an H100's peak, a GB200 2.5
    times it), so one list of counts for every type would price a deadline job on a tenth of the compute on one
    type and on 2.5 times it on another. Each rung becomes ``node``'s count of the same aggregate peak, rounded in
    log space to whole nodes times a power of two (within a factor of sqrt 2 of the equivalent), at least one node.
    Without a bf16 peak for either, the ladder unchanged.
    """
    own = node.peaks.get("bf16")
    if not reference_flops or own is None or not own.dense_flops_per_s:
        return COUNT_LADDER
    per = int(node.accelerators_per_node)
    out = set()
    for c in COUNT_LADDER:
        nodes = c * reference_flops / own.dense_flops_per_s / per
        out.add(per * 2 ** max(0, round(math.log2(nodes))) if nodes > 0 else per)
    return tuple(sorted(out))


def _short_count(x: float | None) -> str:
    if x is None:
        return "?"
    for f, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= f:
            return f"{x / f:.3g}{s}"
    return f"{x:.3g}"


def _number(raw: Mapping[str, Any], key: str, where: str, *, integer: bool = False, lo: float = 0.0,
            lo_open: bool = True, hi: float | None = None, hi_open: bool = False) -> Any:
    v = raw.get(key)
    if v is None:
        return None
    name = f"{where}.{key}"
    if isinstance(v, str):
        try:
            v = float(v)  # YAML reads 1e12 (no dot) as a string
        except ValueError:
            raise InputError(f"{name}: expected a number, got {raw.get(key)!r}") from None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise InputError(f"{name}: expected a {'whole ' if integer else ''}number, got {raw.get(key)!r}")
    if integer:
        if float(v) != int(v):
            raise InputError(f"{name}: expected a whole number, got {raw.get(key)!r}")
        v = int(v)
    if v < lo or (lo_open and v == lo):
        raise InputError(f"{name}: must be {'>' if lo_open else '>='} {lo:g}, got {raw.get(key)!r}")
    if hi is not None and (v > hi or (hi_open and v == hi)):
        raise InputError(f"{name}: must be {'<' if hi_open else '<='} {hi:g}, got {raw.get(key)!r}")
    return v


def parse_job(mapping: Any, where: str = "job") -> Job:
    """Validate a ``job:`` mapping; raises :class:`InputError` naming ``where.field`` on the first problem."""
    if isinstance(mapping, Job):
        return mapping
    if not isinstance(mapping, Mapping):
        raise InputError(f"{where}: expected a mapping with 'model' and 'tokens' or 'target_loss', got {mapping!r}")
    unknown = sorted(set(mapping) - set(KEYS))
    if unknown:
        raise InputError(f"{where}.{unknown[0]}: unknown key; valid choices: {', '.join(KEYS)}")
    model = mapping.get("model")
    if not isinstance(model, str) or not model.strip():
        from hwmodels.predict.spec import PRESETS

        raise InputError(f"{where}.model: expected a preset name or 'key=value,...' spec, got {model!r}; "
                         f"presets: {', '.join(sorted(PRESETS))}")
    try:
        from hwmodels.predict.spec import parse_spec

        parse_spec(model.strip())
    except ValueError as exc:
        raise InputError(f"{where}.model: {exc}") from None
    tokens = _number(mapping, "tokens", where)
    target = _number(mapping, "target_loss", where)
    if (tokens is None) == (target is None):
        raise InputError(f"{where}: give exactly one of 'tokens' (training tokens) or 'target_loss' (nats/token)")
    gb = _number(mapping, "global_batch", where, integer=True)
    seq = _number(mapping, "seq_len", where, integer=True)
    precision = mapping.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise InputError(f"{where}.precision: unknown value {precision!r}; valid choices: {', '.join(PRECISIONS)}")
    acc_raw = mapping.get("accelerators")
    counts: tuple[int, ...] = ()
    if acc_raw is not None:
        items = acc_raw if isinstance(acc_raw, list | tuple) else [acc_raw]
        if not items:
            raise InputError(f"{where}.accelerators: expected a non-empty list of counts")
        out = []
        for i, c in enumerate(items):
            if isinstance(c, bool) or not isinstance(c, int) or c < 1:
                raise InputError(f"{where}.accelerators[{i}]: expected a whole number >= 1, got {c!r}")
            out.append(c)
        counts = tuple(dict.fromkeys(out))
    deadline = _number(mapping, "deadline_days", where)
    budget = _number(mapping, "budget_usd", where)
    if not counts and deadline is None and budget is None:
        raise InputError(f"{where}: give 'accelerators' (a list of counts) or 'deadline_days' or 'budget_usd'")
    pr_raw = mapping.get("pricing", list(PRICING_MODES))
    items = pr_raw if isinstance(pr_raw, list | tuple) else [pr_raw]
    if not items:
        raise InputError(f"{where}.pricing: expected a non-empty list; valid choices: {', '.join(PRICING_MODES)}")
    for i, m in enumerate(items):
        if m not in PRICING_MODES:
            raise InputError(f"{where}.pricing[{i}]: unknown value {m!r}; valid choices: {', '.join(PRICING_MODES)}")
    level = _number(mapping, "level", where, hi=1.0, hi_open=True)
    framework = mapping.get("framework")
    if framework is not None:
        from hwmodels.predict.predictor import FRAMEWORK_UNKNOWN, framework_choice_error

        why = framework_choice_error(framework)
        if why:
            raise InputError(f"{where}.framework: {why}")
        framework = None if framework == FRAMEWORK_UNKNOWN else framework
    return Job(model=model.strip(), tokens=float(tokens) if tokens is not None else None,
               target_loss=float(target) if target is not None else None, global_batch=gb, seq_len=seq,
               precision=precision, accelerators=counts, deadline_days=deadline, budget_usd=budget,
               pricing=tuple(dict.fromkeys(items)), level=float(level) if level is not None else 0.9,
               framework=framework)


# ----------------------------------------------------------------------------- tokens
@dataclass(frozen=True, kw_only=True)
class TokenBudget:
    """Training tokens of the job with their ``level`` interval and where they came from."""

    tokens: float
    lo: float
    hi: float
    level: float
    source: str
    law: str | None = None
    n_params: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def rel_lo(self) -> float:
        """Factor by which the low end is below the point (>= 1)."""
        return self.tokens / self.lo if self.lo > 0 else math.inf

    @property
    def rel_hi(self) -> float:
        return self.hi / self.tokens

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"notes": list(self.notes)}


def job_tokens(job: Job, runs: Iterable[tuple[float, float, float]] = (), *, seed: int = 0) -> TokenBudget:
    """Tokens of ``job``: as declared, or from its target loss via the scaling law.

    ``runs`` are the plan's own ``(n_params, tokens, final loss)``; with three or
    more distinct model sizes (and six runs) the law is fitted from them
    (:class:`hwmodels.scaling_law.ChinchillaFit`, bootstrap interval), else the
    published default law is used and the reason is noted.
    """
    if job.tokens is not None:
        return TokenBudget(tokens=job.tokens, lo=job.tokens, hi=job.tokens, level=job.level,
                           source="declared in the job (no uncertainty)")
    from hwmodels import scaling_law as SL

    spec = job.spec()
    n = float(spec.n_params())
    runs = [r for r in runs if all(math.isfinite(x) and x > 0 for x in r)]
    law = SL.DEFAULT_LAW
    notes = []
    if len({round(r[0]) for r in runs}) >= 3 and len(runs) >= 6:
        law = SL.ChinchillaFit(n_boot=100, seed=seed).fit([r[0] for r in runs], [r[1] for r in runs],
                                                          [r[2] for r in runs], source="fitted from this plan's runs")
    else:
        notes.append(f"scaling law: published {law.name} ({law.source}); the plan's own runs cover "
                     f"{len({round(r[0]) for r in runs})} model size(s), 3 are needed to fit one")
    t = law.tokens_for_loss(n, job.target_loss, level=job.level, seed=seed)
    if not t.reachable or not math.isfinite(t.tokens):
        raise InputError(f"job.target_loss: {job.target_loss:g} is not reachable by a {_short_count(n)}-parameter "
                         f"model under {law.name}: {t.message}")
    if not t.reliable:
        notes.append(f"scaling law: {t.message}")
    return TokenBudget(tokens=float(t.tokens), lo=float(t.lo), hi=float(t.hi), level=t.level,
                       source=f"{law.name}: {law.source}", law=law.name, n_params=n, notes=tuple(notes))


__all__ = ["Job", "parse_job", "TokenBudget", "job_tokens", "COUNT_LADDER", "LADDER_REFERENCE", "ladder_counts",
           "PRECISIONS", "PRICING_MODES"]
