"""Layout search and the library entry points ``predict_job`` and ``search``.

``search`` enumerates the layouts of :func:`hwmodels.predict.layout.enumerate_layouts`
for one job on one node type, drops those that do not fit in memory, keeps
for each (tp, pp, interleave, sharding, micro-batch) only the least
recomputation that fits (more recomputation only adds time), prices the rest
with the step model and returns them fastest first (and, with a price, the
cheapest, which for one node type is the fastest: the accelerator count is
fixed). ``search_all`` runs it for every node type of a catalog.

Speed: the per-layer op costs are cached per (calibration, spec, tp,
micro-batch, recompute); a layout then costs a few arithmetic operations
(``benchmarks/predict_speed.py``). A layout whose lower bound (compute,
memory-bound time, exposed TP collectives, bubble) cannot beat the slowest
kept one is not priced, and the memory-safe pick is found in the same walk.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hwmodels.errors import ModelInputError
from hwmodels.predict.calibration import Calibration, KernelPoint, calibrate
from hwmodels.predict.layout import Layout, enumerate_layouts
from hwmodels.predict.memory import GiB
from hwmodels.predict.ops import local_seq
from hwmodels.predict.predictor import (Prediction, _head_cost, asymmetric_split, framework_factors, layer_cost,
                                        layout_memory, make_prediction, memory_held_out_error, search_optimism,
                                        step_times)
from hwmodels.predict.spec import ModelSpec

#: (policy, share of layers) in the order the search tries them: least recomputation first; full recomputation
#: of part of the layers (block-level checkpointing) sits between selective and full of every layer
RECOMPUTE_ORDER = (("none", 1.0), ("selective", 1.0), ("full", 0.25), ("full", 0.5), ("full", 0.75), ("full", 1.0))
#: Context-parallel degrees the search tries for long sequences (a stated degree is kept): CP splits each sequence
#: over ranks, which frameworks use from 8k tokens up (NeMo's Llama 3 70B/405B recipes: CP 2 at 8k; MLPerf Llama 3.1
#: 8B/405B at 8k: CP 2); below CP_MIN_SEQ tokens only 1
CP_SEARCH = (1, 2, 4)
CP_MIN_SEQ = 8192
#: Shares of a stage's layers whose activations the search tries offloading to host memory (``Layout.offload_layers``,
#: rounded, below the stage's layer count) where the node has a host-link figure (``Calibration.host_link``) and
#: recompute is not stated: NVIDIA's GB200/GB300 Megatron-Bridge recipes offload 20-40 of 80 layers instead of
#: recomputing (data/reference/mbridge_recipe_audit.csv)
OFFLOAD_SHARES = (0.125, 0.25, 0.375, 0.5, 0.625, 0.75)
DEFAULT_TOKENS_PER_BATCH = 4 * 1024 * 1024  # default global batch: ~4M tokens (GPT-3 175B used 3.2M, Llama 3 4-16M)


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    best: Prediction | None
    runners_up: tuple[Prediction, ...]
    considered: int
    fitting: int
    cheapest: Prediction | None = None
    smallest_memory: Any = None  # the least-memory layout when nothing fits: (Layout, MemoryEstimate)
    #: the fastest layout that still fits when its memory is the memory model's held-out q90 error above the
    #: estimate (``memory_margin``); ``best`` itself when it does; None when no layout fits with that margin
    memory_safe: Prediction | None = None
    memory_margin: float | None = None  # relative margin the memory-safe pick keeps (None: no memory validation)
    #: when nothing fits by the point estimate: the fastest layout whose estimate is within the memory model's
    #: held-out q90 error of the capacity (:func:`memory_plausible_capacity`), at micro-batch 1 where the job states
    #: none, priced (it does not fit by the estimate, and says so); None when none is, or without a memory
    #: validation file
    within_error: Prediction | None = None
    #: when nothing fits even within that error: the least-memory layout (``smallest_memory``), priced anyway and
    #: marked as not fitting; None otherwise
    least_memory: Prediction | None = None

    @property
    def memory_safe_slowdown(self) -> float | None:
        """How much slower (fraction, by the model) the memory-safe pick is than ``best``: 0.0 when ``best`` keeps
        the headroom; None without a pick."""
        if self.best is None or self.memory_safe is None:
            return None
        return 0.0 if self.memory_safe is self.best else _slower(self.best, self.memory_safe)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"considered": self.considered, "fitting": self.fitting,
                               "best": self.best.to_dict() if self.best else None,
                               "runners_up": [p.to_dict() for p in self.runners_up]}
        if self.cheapest is not None:
            out["cheapest"] = self.cheapest.to_dict()
        if self.memory_margin is not None:
            out["memory_margin"] = self.memory_margin
            out["memory_safe"] = self.memory_safe.to_dict() if self.memory_safe else None
        if self.best is None and self.smallest_memory is not None:
            lay, mem = self.smallest_memory
            out["smallest_memory"] = {"layout": lay.to_dict(), "memory_GiB": mem.to_dict()}
        if self.within_error is not None:
            out["within_error"] = self.within_error.to_dict()
        if self.least_memory is not None:
            out["least_memory"] = self.least_memory.to_dict()
        return out


def _noted(p: Prediction, note: str) -> Prediction:
    """``p`` with ``note`` appended to its notes."""
    return replace(p, notes=p.notes + (note,))


def _slower(fast: Prediction, slow: Prediction) -> float:
    """How much slower ``slow`` is than ``fast`` (fraction of throughput)."""
    return fast.tokens_per_s / slow.tokens_per_s - 1.0


def _lower_bound(spec: ModelSpec, cal: Calibration, lay: Layout, gb: int, seq: int, factors: Any,
                 memo: dict, attention: str = "flash") -> float:
    """Seconds per sequence from compute and memory-bound time, the layers' exposed TP time and the bubble alone
    (no data-parallel, pipeline or context-parallel communication): no more than :func:`step_times` gives."""
    key = (lay.tp, lay.cp, lay.micro_batch, lay.recompute, lay.recompute_layers, lay.sequence_parallel,
           lay.precision)
    costs = memo.get(key)
    if costs is None:
        cf, cb, mf, mb, tpc, af, ab = layer_cost(cal, spec, lay.tp, lay.micro_batch, seq, lay.recompute,
                                                 lay.recompute_layers, lay.sequence_parallel, attention,
                                                 lay.precision, lay.cp)
        hf, hb, hmf, hmb, *_ = _head_cost(cal, spec, lay.tp, lay.micro_batch, local_seq(seq, lay.cp),
                                          lay.precision)
        costs = memo[key] = (cf + cb + mf + mb - af - ab, hf + hb + hmf + hmb, af + ab, tpc)
    eta = factors.eta
    layers = -(-spec.n_layers // lay.pp)
    stage = (layers * costs[0] + costs[1]) / eta + layers * costs[2]  # attention is not divided (step_times)
    if asymmetric_split(spec.n_layers, lay.pp, lay.interleave):  # the last stage runs one layer fewer (step_times)
        stage = max(layers * (costs[0] / eta + costs[2]), stage - (costs[0] / eta + costs[2]))
    # a layer's TP collectives: all exposed, or when pipelined with the GEMMs at least 5% (step_times)
    stage += layers * costs[3] / factors.comm_eff * (0.05 if lay.tp_comm_overlap and lay.tp > 1 else 1.0)
    m = -(-gb // (lay.dp * lay.micro_batch))
    t = stage * (m + ((lay.pp - 1) / lay.interleave if lay.pp > 1 else 0.0))
    return t / (m * lay.dp * lay.micro_batch)


class _Walk:
    """One capacity's walk of the scan (:func:`_scan`): the ``top`` fastest layouts fitting ``capacity`` bytes."""

    __slots__ = ("capacity", "top", "scored", "kth", "considered", "fitting", "active", "found", "done",
                 "fit_offload")

    def __init__(self, capacity: float, top: int) -> None:
        self.capacity, self.top = capacity, top
        self.scored: list[tuple[float, Layout, Any]] = []
        self.kth = float("inf")
        self.considered = self.fitting = 0
        self.active = self.found = self.done = self.fit_offload = False

    def keep(self, seconds: float, lay: Layout, st: Any) -> None:
        self.scored.append((seconds, lay, st))
        if len(self.scored) >= self.top:
            self.scored.sort(key=lambda x: x[0])
            del self.scored[self.top:]
            self.kth = self.scored[-1][0]


def _scan(*, spec: ModelSpec, cal: Calibration, accelerators: int, gb: int, seq: int, precision: str,
          tp: int | None, pp: int | None, sharding: str | None, micro_batch: int | None, recompute: str | None,
          factors: Any, attention: str, interleave: int | None, tp_comm_overlap: bool, dp_comm_overlap: bool,
          cp: int | None, capacity: float, top: int, quantized_saves: bool, offload_layers: int = 0,
          search_offload: bool = True, safe_capacity: float | None = None,
          memo: dict | None = None) -> tuple[list[tuple[float, Layout, Any]], int, int, Any, list]:
    """The ``top`` fastest layouts whose memory estimate is at most ``capacity`` bytes, fastest first, as
    (seconds per sequence, layout, StepTimes); with the count considered, the count fitting, the least-memory
    (layout, estimate) seen, and, with ``safe_capacity``, the fastest layout fitting that smaller capacity (a list
    of at most one; empty without it). ``memo``: the per-layer costs of the lower bound, shared by scans of one job.

    Each (tp, pp, interleave, sharding, hybrid) is walked in ascending micro-batch and, per micro-batch, in
    ascending recomputation (with activation offload between none and selective) up to the first layout that fits;
    a layout whose lower bound (:func:`_lower_bound`) cannot beat the slowest kept one ends its ladder, and a
    micro-batch at which nothing fits ends the walk. The two capacities walk the same layouts side by side, each
    with its own stopping points, so a layout's memory and step time are computed once for both."""
    walks = [_Walk(capacity, top)] + ([_Walk(safe_capacity, 1)] if safe_capacity is not None else [])
    main = walks[0]
    best_mem = None
    rcs = [(recompute, 1.0)] if recompute else list(RECOMPUTE_ORDER)
    memo = {} if memo is None else memo
    ladders: dict[int, list] = {}  # pipeline depth -> the (recompute, offloaded layers) rungs of its ladder
    cps = [cp] if cp else [c for c in (CP_SEARCH if seq >= CP_MIN_SEQ else (1,)) if seq % c == 0]
    bases = (b for c in cps
             for b in enumerate_layouts(accelerators=accelerators, n_layers=spec.n_layers, n_heads=spec.n_heads,
                                        global_batch=gb, scale_up=cal.scale_up_size, precision=precision, tp=tp,
                                        pp=pp, sharding=sharding, micro_batch=micro_batch, recompute=rcs[0][0],
                                        group_micro=True, interleave=interleave, cp=c))
    for base in bases:
        # base: the layouts of one (tp, pp, interleave, sharding, hybrid) in ascending micro-batch
        for w in walks:
            w.active = True
        for lay0 in base:
            live = [w for w in walks if w.active]
            if not live:
                break  # a larger micro-batch needs more memory still
            if (tp_comm_overlap and lay0.tp > 1) or not dp_comm_overlap or not quantized_saves:
                lay0 = replace(lay0, tp_comm_overlap=tp_comm_overlap and lay0.tp > 1, dp_comm_overlap=dp_comm_overlap,
                               quantized_saves=quantized_saves)
            if offload_layers:
                if offload_layers >= spec.n_layers / lay0.pp:
                    break  # a stage this short cannot offload that many layers (memory.offloaded_layers)
                lay0 = replace(lay0, offload_layers=offload_layers)
            for w in live:
                w.found = w.done = w.fit_offload = False
            cands = ladders.get(lay0.pp)
            if cands is None:
                # with a host link and no stated offload or recompute, offloading some layers' activations
                # (recompute none) is tried between no recomputation and recomputation: each ladder is walked to
                # its first fit
                offs = (_offload_ladder(spec.n_layers / lay0.pp) if search_offload and offload_layers == 0
                        and recompute is None and cal.host_link is not None else [])
                cands = ladders[lay0.pp] = ([(rcs[0], 0)] + [(rcs[0], k) for k in offs]
                                            + [(rc, 0) for rc in rcs[1:]])
            for rc, k in cands:
                # the first offload that fits is the cheapest of its ladder
                walking = [w for w in live if not w.done and not (k and w.fit_offload)]
                if not walking:
                    if all(w.done for w in live):
                        break
                    continue
                lay = lay0 if rc == (lay0.recompute, lay0.recompute_layers) else lay0.evolve(
                    recompute=rc[0], recompute_layers=rc[1])
                if k:
                    lay = lay.evolve(offload_layers=k)
                bound = None
                pending = []
                for w in walking:
                    w.considered += 1
                    if len(w.scored) >= w.top:
                        # a lower bound per sequence: the DP, PP and CP communication left out can only add to it
                        if bound is None:
                            bound = _lower_bound(spec, cal, lay, gb, seq, factors, memo, attention)
                        if bound >= w.kth:
                            w.found = w.done = True  # cannot tell whether it fits; larger micro-batches may be faster
                            continue
                    pending.append(w)
                if not pending:
                    continue
                mem = layout_memory(spec, cal, lay, global_batch=gb, seq_len=seq, attention=attention)
                if pending[0] is main and (best_mem is None or mem.total < best_mem[1].total):
                    best_mem = (lay, mem)
                st = None
                for w in pending:
                    if mem.total > w.capacity:
                        continue
                    w.fitting += 1
                    w.found = True
                    if st is None:
                        st = step_times(spec, cal, lay, global_batch=gb, seq_len=seq, eta=factors.eta,
                                        comm_eff=factors.comm_eff, overlap_cost=factors.overlap_cost,
                                        attention=attention, memory=mem)
                    w.keep(st.total / (st.microbatches * lay.dp * lay.micro_batch), lay, st)
                    if k:
                        w.fit_offload = True  # an offload fits: recomputation is tried too, and the faster kept
                    else:
                        w.done = True  # more recomputation only adds time
            for w in live:
                if not w.found:
                    w.active = False
    for w in walks:
        w.scored.sort(key=lambda x: x[0])
    safe = walks[1].scored if len(walks) > 1 else []
    return main.scored, main.considered, main.fitting, best_mem, safe


def _offload_ladder(stage_layers: float) -> list[int]:
    """Offloaded-layer counts the search tries on a stage of ``stage_layers`` layers (OFFLOAD_SHARES, distinct,
    ascending, at least 1 and below the stage's layers)."""
    n = int(stage_layers)
    return sorted({k for k in (round(f * stage_layers) for f in OFFLOAD_SHARES) if 1 <= k < n})


def default_global_batch(seq_len: int) -> int:
    return max(1, DEFAULT_TOKENS_PER_BATCH // seq_len)


def search(spec: ModelSpec, cal: Calibration, *, hardware: str, accelerators: int, global_batch: int | None = None,
           seq_len: int | None = None, precision: str = "bf16", tp: int | None = None, pp: int | None = None,
           sharding: str | None = None, micro_batch: int | None = None, recompute: str | None = None,
           tokens: float | None = None, usd_per_accelerator_hour: float | None = None, pricing: str | None = None,
           top: int = 5, eta: float | None = None, comm_eff: float | None = None, overlap_cost: float | None = None,
           error_path: Path | None = None, min_billed_hours: float = 0.0, attention: str = "flash",
           interleave: int | None = None, tp_comm_overlap: bool = False, dp_comm_overlap: bool = True,
           cp: int | None = None, memory_safe: bool = True, memory_error_path: Path | None = None,
           quantized_saves: bool = True, offload_layers: int = 0, search_offload: bool = True,
           framework: str | None = None) -> SearchResult:
    """Fastest fitting layouts for the job on one node type; fixed arguments are honoured. ``attention``: the
    attention core the framework runs (``flash``: a fused kernel; ``materialized``: score GEMMs and a softmax);
    ``tp_comm_overlap``: the framework pipelines TP collectives with the GEMMs (``Layout.tp_comm_overlap``; off by
    default: not every framework does, and a new prediction does not know the framework); ``dp_comm_overlap``:
    DDP/ZeRO-1 gradients reduced under the last backward (``Layout.dp_comm_overlap``, on by default);
    ``quantized_saves``: fp8/fp4 linears keep quantized inputs for the backward (``Layout.quantized_saves``, TE's
    way, on by default); ``offload_layers``: each stage's saved activations of that many layers go to host memory
    (``Layout.offload_layers``; layouts whose stages have no more layers than that are skipped); ``search_offload``:
    where the node has a host-link figure and neither offload nor recompute is given, offloading a share of each
    stage's layers (OFFLOAD_SHARES) is tried as well as recomputation, and the faster kept; ``cp``: a
    stated context-parallel degree; when not stated, CP_SEARCH for sequences of CP_MIN_SEQ tokens and more, else 1.

    ``memory_safe``: also return the fastest layout that fits with the memory model's held-out q90 error as
    headroom (``SearchResult.memory_safe``, :func:`memory_safe_capacity`): the fit verdict of ``best`` rests on a
    point estimate whose error on published peak memory is that large, and the search otherwise favours layouts
    at the edge of the capacity (more micro-batch, less recomputation).

    ``framework``: a stated framework family (``make_prediction``): the layouts are ranked and priced with its
    fitted factors."""
    seq = seq_len or spec.seq_len
    gb = global_batch or default_global_batch(seq)
    factors = framework_factors(eta=eta, comm_eff=comm_eff, overlap_cost=overlap_cost, path=error_path,
                                framework=framework)
    cap = cal.memory_capacity_bytes
    job = dict(spec=spec, cal=cal, accelerators=accelerators, gb=gb, seq=seq, precision=precision, tp=tp, pp=pp,
               sharding=sharding, micro_batch=micro_batch, recompute=recompute, factors=factors,
               attention=attention, interleave=interleave, tp_comm_overlap=tp_comm_overlap,
               dp_comm_overlap=dp_comm_overlap, cp=cp, quantized_saves=quantized_saves,
               offload_layers=offload_layers, search_offload=search_offload, memo={})
    safe_cap, margin = memory_safe_capacity(cap, memory_error_path) if memory_safe else (cap, None)
    scored, considered, fitting, best_mem, alt = _scan(**job, capacity=cap, top=top,
                                                       safe_capacity=safe_cap if margin is not None else None)

    def priced(lay: Layout, st: Any | None) -> Prediction:
        return make_prediction(spec, cal, lay, hardware=hardware, accelerators=accelerators, global_batch=gb,
                               seq_len=seq, tokens=tokens, usd_per_accelerator_hour=usd_per_accelerator_hour,
                               pricing=pricing, eta=eta, comm_eff=comm_eff, overlap_cost=overlap_cost,
                               error_path=error_path, times=st, min_billed_hours=min_billed_hours,
                               attention=attention, memory_error_path=memory_error_path, framework=framework)

    if not scored:
        within = None
        hi_cap, rel = memory_plausible_capacity(cap, memory_error_path)
        if rel is not None:
            # at the smallest micro-batch where none is stated: the fastest layout at the edge of the error would
            # otherwise take the largest micro-batch that reaches it, the least likely of them to run
            near = _scan(**{**job, "micro_batch": micro_batch or 1}, capacity=hi_cap, top=1, safe_capacity=None)[0]
            if near:
                within = priced(near[0][1], near[0][2])
                within = _noted(within, f"no layout fits by the memory model's point estimate: this is the fastest"
                                        f"{'' if micro_batch else ' at micro-batch 1'} whose estimate "
                                        f"({within.memory_per_accelerator_GiB:.1f} GiB) is within the model's "
                                        f"held-out q90 error (+{rel:.0%}) of the capacity, so it may fit; the "
                                        "published runs that ran where no layout fit the estimate were predicted "
                                        "best this way (predictor_error.json unfit_rule)")
        least = None
        if within is None and best_mem is not None:
            least = _noted(priced(best_mem[0], None), "no layout fits in memory, not even within the memory model's "
                                                      "held-out error: this is the least-memory layout, priced anyway")
        return SearchResult(best=None, runners_up=(), considered=considered, fitting=0, smallest_memory=best_mem,
                            within_error=within, least_memory=least)

    preds = [priced(lay, st) for _, lay, st in scored[:top]]
    note = search_optimism(error_path)
    if note:
        preds = [_noted(p, note) for p in preds]
    safe = None
    if margin is not None:  # memory_safe with a memory validation file
        if scored[0][2].memory.total <= safe_cap:
            safe = preds[0]
        elif alt:
            safe = priced(alt[0][1], alt[0][2])
            safe = _noted(safe, f"memory-safe pick: fits even with {margin:.0%} more memory than estimated (the "
                                f"memory model's held-out q90 error); the fastest layout ({preds[0].layout.label()}, "
                                f"{preds[0].memory_per_accelerator_GiB:.1f} GiB) is {_slower(preds[0], safe):.1%} "
                                "faster by the model but its fit is not settled")
        if safe is not preds[0]:
            what = ("no layout of this job fits with that headroom" if safe is None
                    else f"the fastest that does ({safe.layout.label()}, {safe.memory_per_accelerator_GiB:.1f} "
                         f"GiB) is {_slower(preds[0], safe):.1%} slower by the model")
            preds[0] = _noted(preds[0], f"memory-safe alternative: this layout does not fit with the memory model's "
                                        f"held-out q90 error ({margin:.0%}) as headroom; {what}")
    return SearchResult(best=preds[0], runners_up=tuple(preds[1:]), considered=considered, fitting=fitting,
                        cheapest=preds[0] if usd_per_accelerator_hour is not None else None,
                        memory_safe=safe, memory_margin=margin)


def memory_safe_capacity(capacity_bytes: float, memory_error_path: Path | None = None) -> tuple[float, float | None]:
    """(the capacity a layout's memory estimate must stay under to fit even when the true peak is the memory
    model's held-out q90 error above it, that error); (capacity, None) without a memory validation file."""
    rel, _ = memory_held_out_error(memory_error_path)
    if rel is None:
        return capacity_bytes, None
    return capacity_bytes / (1.0 + rel), rel


def memory_plausible_capacity(capacity_bytes: float, memory_error_path: Path | None = None
                              ) -> tuple[float, float | None]:
    """(the capacity a layout's memory estimate may reach and still fit if the true peak is the memory model's
    held-out q90 error below the estimate, that error): the other side of :func:`memory_safe_capacity`;
    (capacity, None) without a memory validation file."""
    rel, _ = memory_held_out_error(memory_error_path)
    if rel is None:
        return capacity_bytes, None
    return capacity_bytes * (1.0 + rel), rel


def predict_job(*, hardware: Any, accelerators: int, model: ModelSpec | str, seq_len: int | None = None,
                micro_batch: int | None = None, global_batch: int | None = None, precision: str = "bf16",
                sharding: str | None = None, tp: int | None = None, pp: int | None = None,
                interleave: int | None = None, activation_checkpointing: str | None = None, layout: str | None = None,
                tokens: float | None = None, pricing: str | None = None, points: Iterable[KernelPoint] = (),
                calibration: Calibration | None = None, eta: float | None = None,
                error_path: Path | None = None, catalog: Any = None, cp: int | None = None,
                tp_comm_overlap: bool = False, offload_layers: int = 0,
                framework: str | None = None, attention: str = "flash") -> Prediction | SearchResult:
    """One job: a fixed layout when tp, pp, sharding, micro-batch and recompute are all given and
    ``layout != "auto"``; else the layout search. ``hardware`` is a catalog id or a ``NodeType``.

    ``cp``: the context-parallel degree (searched when None); ``tp_comm_overlap``: TP collectives pipelined with
    the GEMMs (``Layout.tp_comm_overlap``, off by default); ``interleave``: virtual pipeline chunks per rank
    (searched when None; 1 for a fixed layout); ``offload_layers``: each pipeline stage's saved activations of that
    many layers go to host memory (``Layout.offload_layers``; 0 = none stated: the search may choose it, ``search``'s
    ``search_offload``); ``framework``: a stated framework family (``make_prediction``; None or "unknown": not
    stated); ``attention``: the attention core (``flash``, at the calibration's kernel rate, or ``materialized``:
    :func:`search`).

    Returns a :class:`Prediction` (fixed layout) or a :class:`SearchResult`.
    The cost uses ``node.price_per_hour(pricing) / accelerators_per_node`` per accelerator-hour; a committed
    term (reserved modes) is billed in full even when the job is shorter, as the report bills it.
    """
    from hwmodels.predict.spec import parse_spec

    node = hardware
    if isinstance(hardware, str):
        from hwmodels.catalog import default_catalog
        node = (catalog or default_catalog()).get(hardware)
    spec = parse_spec(model) if isinstance(model, str) else model
    spec = spec.with_seq_len(seq_len)
    seq = spec.seq_len
    if accelerators < 1:
        raise ModelInputError(f"accelerators: must be >= 1, got {accelerators}")
    if cp is not None and (cp < 1 or seq % cp):
        raise ModelInputError(f"cp: must be a positive divisor of the sequence length ({seq}), got {cp}")
    cal = calibration or calibrate(node, points)
    cal.peak_flops(precision)  # a precision the hardware has no units for is an input error, before any search
    price = node.price_per_accelerator_hour(pricing) if pricing else None
    billed = node.pricing[pricing].min_billed_hours if pricing else 0.0  # a committed term bills in full
    gb = global_batch or default_global_batch(seq)
    fixed = (layout != "auto" and tp is not None and pp is not None and sharding is not None
             and micro_batch is not None and activation_checkpointing is not None)
    if fixed:
        c = cp or 1
        dp, rem = divmod(accelerators, tp * pp * c)
        if rem:
            raise ModelInputError(f"tp x pp x cp ({tp} x {pp} x {c}) must divide accelerators ({accelerators})")
        lay = Layout(dp=dp, tp=tp, pp=pp, interleave=interleave or 1, micro_batch=micro_batch, sharding=sharding,
                     recompute=activation_checkpointing, sequence_parallel=tp > 1, precision=precision, cp=c,
                     tp_comm_overlap=tp_comm_overlap and tp > 1, offload_layers=offload_layers)
        return make_prediction(spec, cal, lay, hardware=node.id, accelerators=accelerators, global_batch=gb,
                               seq_len=seq, tokens=tokens, usd_per_accelerator_hour=price, pricing=pricing, eta=eta,
                               error_path=error_path, min_billed_hours=billed, framework=framework,
                               attention=attention)
    return search(spec, cal, hardware=node.id, accelerators=accelerators, global_batch=gb, seq_len=seq,
                  precision=precision, tp=tp, pp=pp, sharding=sharding, micro_batch=micro_batch,
                  recompute=activation_checkpointing, tokens=tokens, usd_per_accelerator_hour=price,
                  pricing=pricing, eta=eta, error_path=error_path, min_billed_hours=billed, cp=cp,
                  tp_comm_overlap=tp_comm_overlap, interleave=interleave, offload_layers=offload_layers,
                  framework=framework, attention=attention)


def search_all(spec: ModelSpec, catalog: Iterable[Any], *, accelerators: int, **kw: Any) -> dict[str, SearchResult]:
    """:func:`search` on every node type of ``catalog`` (CPU nodes included)."""
    out = {}
    for node in catalog:
        cal = calibrate(node)
        out[node.id] = search(spec, cal, hardware=node.id, accelerators=accelerators, **kw)
    return out


__all__ = ["search", "search_all", "predict_job", "SearchResult", "default_global_batch", "memory_safe_capacity",
           "memory_plausible_capacity"]
