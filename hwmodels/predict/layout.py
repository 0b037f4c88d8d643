"""A parallel layout and where its groups sit on the machine.

Rank order (Megatron-LM's default, Narayanan et al. 2021, section 3; Megatron-Core
``RankGenerator`` order ``tp-cp-ep-dp-pp``): tensor parallel innermost, then
context parallel, then data parallel, then pipeline stages. So a TP group is
``tp`` consecutive ranks; a CP group strides by ``tp`` and spans ``tp * cp``; the
group the gradients are reduced (and ZeRO state sharded) over is DP x CP
(Megatron-Core's data-parallel group with context parallelism: the CP ranks of a
replica hold the same weights), strides by ``tp`` and spans ``tp * cp * dp``
consecutive ranks; pipeline neighbours are ``tp * cp * dp`` ranks apart. A group
stays on the scale-up fabric (``intra``) when the ranks it spans fit in one
scale-up domain (``scale_up_size``: 8 on an HGX board, the ICI slice on a
TPU), else it crosses the scale-out network (``inter``). A pipeline's hops are
priced per hop (:func:`pp_hops`): where a stage spans less than a domain,
consecutive stages share one and only the hops between domains cross the
network.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from dataclasses import asdict, dataclass

from hwmodels.dtypes import PREDICT_PRECISIONS as PRECISIONS
from hwmodels.errors import ModelInputError, choices_error
from hwmodels.predict.memory import RECOMPUTE, SELECTIVE_SAVES, SHARDINGS

#: interleaved (virtual) pipeline chunks per rank the enumerator tries where none is given
INTERLEAVE_SEARCH = (1, 2, 4)


@dataclass(frozen=True, kw_only=True)
class Layout:
    dp: int
    tp: int = 1
    pp: int = 1
    interleave: int = 1  # virtual pipeline chunks per rank
    micro_batch: int = 1  # sequences per model replica per forward pass
    sharding: str = "ddp"
    recompute: str = "none"
    #: share of each stage's layers the recompute policy applies to; the rest keep every activation (block-level
    #: checkpointing of part of the layers: fms-fsdp's ``selective_checkpointing``, torchtitan's layer SAC);
    #: 1 = every layer
    recompute_layers: float = 1.0
    sequence_parallel: bool = False
    precision: str = "bf16"
    hybrid_shard: bool = False  # shard (zero1/2/3) inside the scale-up domain only, replicate across (HSDP,
    # FSDP HYBRID_SHARD; MaxText multi-slice: ici_fsdp x dcn_data_parallelism)
    #: TP collectives split into chunks and pipelined with the GEMMs they feed (Transformer Engine userbuffers:
    #: Megatron ``--tp-comm-overlap``, NeMo ``tp_comm_overlap``; PyTorch async TP in torchtitan); off, they sit on
    #: the critical path (Shoeybi et al. 2019)
    tp_comm_overlap: bool = False
    #: DDP / ZeRO-1 gradient reduction bucketed and started during the last micro-batch's backward (PyTorch DDP,
    #: DeepSpeed, Megatron-Core ``--overlap-grad-reduce``); off, it runs after the backward pass (Megatron-LM
    #: before Megatron-Core)
    dp_comm_overlap: bool = True
    #: what ``selective`` recomputation keeps (memory.SELECTIVE_SAVES): Korthikanti et al.'s, or only the matmul
    #: outputs (JAX ``checkpoint_dots_with_no_batch_dims``, MaxText ``remat_policy=minimal``)
    selective_saves: str = "korthikanti"
    #: context parallel: each sequence split over ``cp`` ranks (Megatron-Core ``--context-parallel-size``, Transformer
    #: Engine ring attention with load-balanced causal chunks); every rank runs s/cp tokens of each micro-batch
    cp: int = 1
    #: under fp8/fp4, the linears keep their inputs for the weight gradient quantized (Transformer Engine saves the
    #: quantized copy; memory.activation_bytes_per_layer); False: in 16 bits (torchao's float8 linear saves the
    #: high-precision input and casts again in the backward)
    quantized_saves: bool = True
    #: activation offload to host memory (Megatron-Core / Transformer Engine ``cpu_offloading_num_layers``): the saved
    #: activations of this many of a stage's layers are copied to host memory during the forward pass and back
    #: before their backward, over the host link (``Calibration.host_link``), on copy engines beside the compute;
    #: 0 = none
    offload_layers: int = 0

    def __post_init__(self) -> None:
        for f in ("dp", "tp", "pp", "cp", "interleave", "micro_batch"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ModelInputError(f"layout.{f}: must be an integer >= 1, got {v!r}")
        if self.sharding not in SHARDINGS:
            raise choices_error("layout.sharding", self.sharding, SHARDINGS)
        if self.recompute not in RECOMPUTE:
            raise choices_error("layout.activation_checkpointing", self.recompute, RECOMPUTE)
        r = self.recompute_layers
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 < r <= 1.0:
            raise ModelInputError(f"layout.recompute_layers: must be a number in (0, 1], got {r!r}")
        if self.precision not in PRECISIONS:
            raise choices_error("layout.precision", self.precision, PRECISIONS)
        o = self.offload_layers
        if isinstance(o, bool) or not isinstance(o, int) or o < 0:
            raise ModelInputError(f"layout.offload_layers: must be an integer >= 0, got {o!r}")
        for f in ("sequence_parallel", "hybrid_shard", "tp_comm_overlap", "dp_comm_overlap", "quantized_saves"):
            if not isinstance(getattr(self, f), bool):
                raise ModelInputError(f"layout.{f}: must be true or false, got {getattr(self, f)!r}")
        if self.selective_saves not in SELECTIVE_SAVES:
            raise choices_error("layout.selective_saves", self.selective_saves, SELECTIVE_SAVES)
        if self.interleave > 1 and self.pp == 1:
            raise ModelInputError("layout.interleave: needs pp > 1")

    def evolve(self, **changes: Any) -> "Layout":
        """``dataclasses.replace`` without the field checks, for the search's hot path: the caller changes fields
        only to values taken from the valid choices (RECOMPUTE, an enumerated micro-batch, a positive offload
        count), so the copy is as valid as ``self``."""
        new = object.__new__(Layout)
        d = new.__dict__
        d.update(self.__dict__)
        d.update(changes)
        return new

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    def shard_degree(self, scale_up: int) -> int:
        """Ranks the gradients are reduced and the sharded state is split over: dp x cp, or with hybrid_shard the
        ones inside one domain."""
        n = self.dp * self.cp
        if not self.hybrid_shard:
            return n
        inside = max(1, scale_up // self.tp)
        while n % inside:
            inside -= 1
        return min(n, inside)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["activation_checkpointing"] = d.pop("recompute")
        return d

    def label(self) -> str:
        """The compact one-line form (:func:`layout_label`)."""
        return layout_label(self.to_dict())


def layout_label(lay: Mapping[str, Any]) -> str:
    """A layout (``Layout.to_dict()``, or a prediction's JSON ``layout``) in one line for tables:
    ``dp16 tp4 pp8 [cp2] v6 mb2 zero1[(hybrid)] none[@25%][ off20]`` (off: layers whose activations are offloaded
    to host memory)."""
    cp = f" cp{lay['cp']}" if lay.get("cp", 1) > 1 else ""
    share = lay.get("recompute_layers", 1.0)
    return (f"dp{lay['dp']} tp{lay['tp']} pp{lay['pp']}{cp} v{lay['interleave']} mb{lay['micro_batch']} "
            f"{lay['sharding']}{'(hybrid)' if lay.get('hybrid_shard') else ''} {lay['activation_checkpointing']}"
            + (f"@{share:.0%}" if share < 1.0 else "")
            + (f" off{lay['offload_layers']}" if lay.get("offload_layers") else ""))


def group_level(span: int, scale_up: int) -> str:
    """``intra`` when ``span`` consecutive ranks fit in one scale-up domain."""
    return "intra" if span <= scale_up else "inter"


def placement(layout: Layout, *, scale_up: int, accelerators_per_node: int) -> dict[str, tuple[str, int]]:
    """group -> (level, ranks of that group in one scale-up domain) for tp, cp and dp (the DP x CP gradient group)
    (module docstring; the pipeline's hops: :func:`pp_hops`). The domain is the node where NVLink ends at the node
    (HGX: 8 = 8), and the whole NVLink domain where it spans several nodes (GB200 NVL72: 72 GPUs over 18 four-GPU
    trays): a group's ranks inside one domain reduce over its links before the rest crosses the network (the
    collective model's hierarchical geometry, :mod:`hwmodels.predict.collectives`)."""
    domain = max(accelerators_per_node, scale_up, 1)  # ranks that share the scale-up links
    tp, cp, dp = layout.tp, layout.cp, layout.dp * layout.cp
    return {
        "tp": (group_level(tp, scale_up), min(tp, domain)),
        "cp": (group_level(tp * cp, scale_up), max(1, min(cp, domain // tp)) if tp <= domain else 1),
        "dp": (group_level(tp * dp, scale_up), max(1, min(dp, domain // tp)) if tp <= domain else 1),
    }


def pp_hops(layout: Layout, *, scale_up: int, accelerators_per_node: int) -> tuple[str, str]:
    """Levels of the two pipeline hops of the slowest stage: (to the next stage, to the previous one).

    A stage is ``s = tp * cp * dp`` consecutive ranks (module docstring) and a rank's neighbours are ``s`` ranks
    either side. All stages in one domain of ``D`` ranks: both hops ``intra``. With ``s <= D / 2`` (GB200 NVL72 at
    TP 4 x DP 4: four stages a rack; HGX at TP 4 with DP 1: two a node) a stage at a domain's edge crosses it on one
    side only, and no rank has both neighbours in other domains: (``inter``, ``intra``). With ``s > D / 2`` the
    ranks ``r`` with ``D - s <= r mod D < s`` have both neighbours outside their domain: ``inter`` both, as for a
    stage filling a domain or more. The slowest stage's period sets the pipeline's (1F1B: each stage exchanges with
    the next, then with the previous, once per micro-batch and chunk)."""
    domain = max(accelerators_per_node, scale_up, 1)
    stage = layout.tp * layout.cp * layout.dp
    if stage * layout.pp <= domain:
        return ("intra", "intra")
    if 2 * stage > domain:
        return ("inter", "inter")
    return ("inter", "intra")


def divisors(n: int) -> list[int]:
    out = []
    i = 1
    while i * i <= n:
        if n % i == 0:
            out.append(i)
            if i != n // i:
                out.append(n // i)
        i += 1
    return sorted(out)


def enumerate_layouts(*, accelerators: int, n_layers: int, n_heads: int, global_batch: int, scale_up: int,
                      precision: str, tp: int | None = None, pp: int | None = None, sharding: str | None = None,
                      micro_batch: int | None = None, recompute: str | None = None,
                      max_micro_batch: int = 32, group_micro: bool = False,
                      interleave: int | None = None, cp: int = 1) -> Iterator[Any]:
    """Every layout for the job; fixed fields are honoured, the rest enumerated.

    TP: powers of two dividing ``n_heads``, within the scale-up domain.
    PP: divisors of ``accelerators / tp`` up to ``n_layers`` (uneven stages allowed: the slowest has
    ceil(L/pp) layers), with 1, 2 or 4 interleaved chunks where the stage has enough layers (``interleave``
    when given, for pp > 1).
    Micro-batch: powers of two up to ``max_micro_batch`` and the per-replica batch.
    Recompute is enumerated in order none, selective, full (the search keeps the least that fits).
    ``group_micro=True`` yields, per (tp, pp, interleave, sharding, hybrid), an iterator of its layouts in
    ascending micro-batch with ``recompute`` as given (the search walks recompute itself).
    Context parallelism is not searched: ``cp`` (a stated degree) divides the ranks left after TP first.
    """
    if accelerators % cp:
        return
    accelerators //= cp
    tps = [tp] if tp else [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= scale_up and n_heads % t == 0
                           and accelerators % t == 0]
    for t in tps:
        if accelerators % t:
            continue
        rest = accelerators // t
        pps = [pp] if pp else [p for p in divisors(rest) if p <= n_layers and p <= 128]
        for p in pps:
            if rest % p:
                continue
            dp = rest // p
            if dp > global_batch:
                continue
            per_replica = -(-global_batch // dp)
            shards = [sharding] if sharding else (["none"] if dp == 1 else ["ddp", "zero1", "shard_grad_op",
                                                                          "full_shard"])
            if micro_batch:
                mbs = [micro_batch]
            else:
                mbs = sorted({m for m in (1, 2, 4, 8, 16, 32, 64) if m <= min(per_replica, max_micro_batch)}
                             | ({per_replica} if per_replica <= max_micro_batch else set()))
            stage_layers = -(-n_layers // p)
            vs = [1] if p == 1 else ([interleave] if interleave else
                                     [v for v in INTERLEAVE_SEARCH if stage_layers % v == 0 and stage_layers // v >= 1])
            rcs = [recompute] if (recompute or group_micro) else list(RECOMPUTE)
            hybrids = [False, True] if t * dp * cp > scale_up else [False]
            for v in vs:
                for sh in shards:
                    for hy in (hybrids if sh in ("zero1", "shard_grad_op", "full_shard") else [False]):
                        if group_micro:  # built as walked: the search stops at the first that does not fit
                            first = Layout(dp=dp, tp=t, pp=p, interleave=v, micro_batch=mbs[0], sharding=sh,
                                           recompute=rcs[0] or "none", sequence_parallel=t > 1,
                                           precision=precision, hybrid_shard=hy, cp=cp)
                            yield (first.evolve(micro_batch=mb) if mb != mbs[0] else first for mb in mbs)
                            continue
                        for mb in mbs:
                            for rc in rcs:
                                yield Layout(dp=dp, tp=t, pp=p, interleave=v, micro_batch=mb, sharding=sh,
                                             recompute=rc, sequence_parallel=t > 1, precision=precision,
                                             hybrid_shard=hy, cp=cp)


__all__ = ["Layout", "layout_label", "placement", "enumerate_layouts", "group_level", "divisors", "PRECISIONS", "INTERLEAVE_SEARCH"]
