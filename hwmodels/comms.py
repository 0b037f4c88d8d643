"""Collective communication: alpha-beta fits and parallel step-time projections.

**Bus bandwidth** (nccl-tests ``doc/PERFORMANCE.md``): for a collective moving
``S`` bytes in time ``t`` on ``n`` ranks, ``algbw = S / t`` and
``busbw = algbw * F(n)`` with ``F`` = ``2(n-1)/n`` for all_reduce, ``(n-1)/n``
for all_gather, reduce_scatter and alltoall, ``1`` for broadcast, reduce and
sendrecv. ``busbw`` is comparable across rank counts and to link bandwidth.

**Alpha-beta model** (Hockney 1994; for ring collectives Thakur, Rabenseifner
& Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 2005: ring all_reduce time ``2(p-1) alpha + 2 (p-1)/p * S * beta``)::

    t(S, n) = alpha(n) + F(n) * S / B

``B`` is the asymptotic bus bandwidth (``beta_bytes_per_s``) and ``alpha``
the fixed latency. Fit: ``t_i = F(n) S_i / busbw_i``, then weighted least
squares of ``t`` on ``[1, F S]`` with weights ``1/t^2`` (constant relative
noise, which is how timings behave across six decades of size). Intervals are
Student t on the WLS covariance; ``B``'s interval is the image of ``1/B``'s.
Projecting to another rank count: ``latency_scaling="ring"`` scales alpha by
``(n-1)/(n_fit-1)`` (Thakur et al.), ``"tree"`` by ``log2 n / log2 n_fit``,
``"constant"`` keeps it.

**Step-time projections** (all times in seconds):

* data parallel (PyTorch DDP overlaps bucketed gradient all-reduce with the
  backward pass: Li et al., "PyTorch Distributed", VLDB 2020)::

      t = t_compute + max(0, t_allreduce(grad_bytes, dp) - overlap * t_backward)
      t_backward = backward_fraction * t_compute, backward_fraction = 2/3
      (backward is ~2x the forward FLOPs: Kaplan et al. 2020, sec. 2.1, C = 6N = 2N fwd + 4N bwd)

* tensor parallel (Megatron-LM, Shoeybi et al. 2019, sec. 3: two all-reduces
  of the ``b*s*h`` activations in the forward and two in the backward of each
  transformer layer, i.e. ``4 * layers`` per step)::

      t = t_compute / tp + (1 - overlap) * n_allreduce * t_allreduce(activation_bytes, tp)

* pipeline parallel (GPipe, Huang et al. 2019; Narayanan et al., "Efficient
  large-scale language model training on GPU clusters using Megatron-LM",
  SC 2021, sec. 2.2: bubble time / ideal time = ``(p-1)/m``)::

      t = (m + p - 1) * (t_compute / (p * m)) + t_p2p
      bubble fraction of the step = (p - 1) / (m + p - 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import FitResult, as_float_array, check_alpha, single_thread_blas, t_quantile

#: nccl-tests doc/PERFORMANCE.md bus-bandwidth factors F(n)
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
LATENCY_SCALINGS = ("ring", "tree", "constant")
BACKWARD_FRACTION = 2.0 / 3.0  # Kaplan et al. 2020: 4N of 6N FLOPs per token are backward


def busbw_factor(collective: str, ranks: float) -> float:
    if collective not in BUSBW_FACTORS:
        raise choices_error("collective", collective, BUSBW_FACTORS)
    n = float(ranks)
    if n < 1:
        raise ModelInputError(f"ranks must be >= 1, got {ranks}")
    return BUSBW_FACTORS[collective](n)


@dataclass(frozen=True, eq=False)
class AlphaBetaResult(FitResult):
    collective: str = "all_reduce"
    ranks: float = 2.0
    latency_scaling: str = "ring"

    @property
    def alpha_s(self) -> float:
        return float(self.values[0])

    @property
    def beta_bytes_per_s(self) -> float:
        inv = float(self.values[1])
        return 1.0 / inv if inv > 0 else math.inf

    def conf_int(self, alpha: float = 0.05) -> dict[str, tuple[float, float]]:
        ci = super().conf_int(alpha)
        lo, hi = ci["inv_bandwidth_s_per_byte"]
        ci["beta_bytes_per_s"] = (1 / hi if hi > 0 else math.inf, 1 / lo if lo > 0 else math.inf)
        ci["alpha_s"] = ci.pop("alpha_s")
        return ci

    def alpha_at(self, ranks: float) -> float:
        n, n0 = float(ranks), float(self.ranks)
        if self.latency_scaling == "constant" or n == n0:
            return self.alpha_s
        if self.latency_scaling == "ring":
            return self.alpha_s * (n - 1) / (n0 - 1) if n0 > 1 else self.alpha_s
        return self.alpha_s * math.log2(max(n, 2)) / math.log2(max(n0, 2))

    def predict_time(self, size_bytes: Any, ranks: float | None = None) -> np.ndarray:
        """Collective time in seconds for ``size_bytes`` on ``ranks`` (default: the fitted count)."""
        n = self.ranks if ranks is None else float(ranks)
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        return self.alpha_at(n) + busbw_factor(self.collective, n) * s / self.beta_bytes_per_s

    def predict_busbw(self, size_bytes: Any, ranks: float | None = None) -> np.ndarray:
        n = self.ranks if ranks is None else float(ranks)
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        return busbw_factor(self.collective, n) * s / self.predict_time(s, n)

    def predict(self, size_bytes: Any, ranks: float | None = None, *, alpha: float = 0.05) -> dict[str, np.ndarray]:
        """Time and busbw at ``size_bytes`` with a ``1-alpha`` interval on the mean time."""
        alpha = check_alpha(alpha)
        n = self.ranks if ranks is None else float(ranks)
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        f = busbw_factor(self.collective, n)
        scale = self.alpha_at(n) / self.alpha_s if self.alpha_s else 1.0
        X = np.column_stack([np.full_like(s, scale), f * s])
        t = X @ self.values
        se = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, self.cov, X), 0))
        q = t_quantile(1 - alpha / 2, self.dof)
        lo, hi = t - q * se, t + q * se
        return {"size": s, "time_s": t, "time_lo": lo, "time_hi": hi, "busbw": f * s / t,
                "busbw_lo": f * s / hi, "busbw_hi": np.where(lo > 0, f * s / np.maximum(lo, 1e-300), np.inf)}

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        d = super().to_dict(alpha)
        d.update(alpha_s=self.alpha_s, beta_bytes_per_s=self.beta_bytes_per_s, collective=self.collective,
                 ranks=self.ranks, latency_scaling=self.latency_scaling,
                 conf_int={k: list(v) for k, v in self.conf_int(alpha).items()})
        return d


@dataclass(frozen=True, kw_only=True)
class AlphaBeta:
    """``AlphaBeta(collective="all_reduce").fit(size_bytes, busbw=..., ranks=8)`` (or ``time_s=``)."""

    collective: str = "all_reduce"
    latency_scaling: str = "ring"

    def __post_init__(self) -> None:
        if self.collective not in BUSBW_FACTORS:
            raise choices_error("alpha_beta.collective", self.collective, BUSBW_FACTORS)
        if self.latency_scaling not in LATENCY_SCALINGS:
            raise choices_error("alpha_beta.latency_scaling", self.latency_scaling, LATENCY_SCALINGS)

    def fit(self, size_bytes: Any, busbw: Any = None, *, ranks: float, time_s: Any = None) -> AlphaBetaResult:
        s = as_float_array(size_bytes, "size")
        f = busbw_factor(self.collective, ranks)
        if (busbw is None) == (time_s is None):
            raise ModelInputError("alpha_beta.fit: give exactly one of busbw= or time_s=")
        if busbw is not None:
            b = as_float_array(busbw, "busbw")
            if b.size != s.size:
                raise ModelInputError(f"alpha_beta.fit: {s.size} sizes but {b.size} busbw values")
            if np.any(b <= 0):
                raise ModelInputError("busbw: values must be > 0 (nccl-tests prints 0.00 for sizes below its resolution; drop those rows)")
            t = f * s / b
        else:
            t = as_float_array(time_s, "time_s")
            if t.size != s.size:
                raise ModelInputError(f"alpha_beta.fit: {s.size} sizes but {t.size} times")
        if np.any(s <= 0) or np.any(t <= 0):
            raise ModelInputError("alpha_beta.fit: sizes and times must be > 0")
        if np.unique(s).size < 2:
            raise ModelInputError("alpha_beta.fit: needs at least 2 distinct sizes")
        X = np.column_stack([np.ones_like(s), f * s])
        w = 1.0 / t**2
        Xw = X * np.sqrt(w)[:, None]
        yw = t * np.sqrt(w)
        with single_thread_blas():
            beta, *_ = np.linalg.lstsq(Xw, yw, rcond=None)
            r = yw - Xw @ beta
            rss = float(np.einsum("i,i->", r, r))
        dof = s.size - 2
        s2 = rss / dof if dof > 0 else math.inf
        with single_thread_blas():
            cov = np.linalg.pinv(Xw.T @ Xw) * s2
        return AlphaBetaResult(model=f"alpha_beta[{self.collective}]", names=("alpha_s", "inv_bandwidth_s_per_byte"),
                               values=beta, cov=cov, n=int(s.size), dof=int(dof), rss=rss,
                               meta={"weights": "1/t^2"}, collective=self.collective, ranks=float(ranks),
                               latency_scaling=self.latency_scaling)


# ------------------------------------------------------------------ projections
def data_parallel_step_s(compute_s: float, grad_bytes: float, dp: int, comm: AlphaBetaResult, *,
                         overlap: float = 1.0, backward_fraction: float = BACKWARD_FRACTION) -> dict[str, float]:
    """DDP step: compute plus the all-reduce not hidden behind backward (module docstring)."""
    _check_frac("overlap", overlap)
    if dp <= 1:
        return {"step_s": compute_s, "compute_s": compute_s, "comm_s": 0.0, "exposed_comm_s": 0.0}
    t_comm = float(comm.predict_time(grad_bytes, dp)[0])
    exposed = max(0.0, t_comm - overlap * backward_fraction * compute_s)
    return {"step_s": compute_s + exposed, "compute_s": compute_s, "comm_s": t_comm, "exposed_comm_s": exposed}


def tensor_parallel_step_s(compute_s: float, activation_bytes: float, tp: int, comm: AlphaBetaResult, *,
                           layers: int, overlap: float = 0.0) -> dict[str, float]:
    """Megatron TP step: compute split tp ways plus 4 all-reduces per layer (module docstring)."""
    _check_frac("overlap", overlap)
    if tp <= 1:
        return {"step_s": compute_s, "compute_s": compute_s, "comm_s": 0.0, "exposed_comm_s": 0.0}
    n_ar = 4 * layers  # Shoeybi et al. 2019: 2 in forward (f, g) + 2 in backward per layer
    t_comm = n_ar * float(comm.predict_time(activation_bytes, tp)[0])
    exposed = (1 - overlap) * t_comm
    return {"step_s": compute_s / tp + exposed, "compute_s": compute_s / tp, "comm_s": t_comm, "exposed_comm_s": exposed}


def pipeline_parallel_step_s(compute_s: float, pp: int, microbatches: int, *, p2p_s: float = 0.0) -> dict[str, float]:
    """GPipe/1F1B step with bubble (p-1)/(m+p-1) of the step (module docstring)."""
    if pp < 1 or microbatches < 1:
        raise ModelInputError(f"pipeline: pp and microbatches must be >= 1, got pp={pp}, microbatches={microbatches}")
    per_micro_stage = compute_s / (pp * microbatches)
    step = (microbatches + pp - 1) * per_micro_stage + p2p_s
    return {"step_s": step, "ideal_s": compute_s / pp, "bubble_fraction": (pp - 1) / (microbatches + pp - 1),
            "bubble_s": (pp - 1) * per_micro_stage}


def project_step_s(compute_s: float, *, dp: int = 1, tp: int = 1, pp: int = 1, microbatches: int = 1,
                   grad_bytes: float = 0.0, activation_bytes: float = 0.0, layers: int = 1,
                   dp_comm: AlphaBetaResult | None = None, tp_comm: AlphaBetaResult | None = None,
                   dp_overlap: float = 1.0, tp_overlap: float = 0.0, p2p_s: float = 0.0) -> dict[str, float]:
    """3-D parallel step time of a model whose single-device step compute is ``compute_s``.

    Compute divides by ``tp`` (tensor), the pipeline adds its bubble, data
    parallelism adds the exposed gradient all-reduce of the ``grad_bytes / (tp*pp)``
    shard each rank owns.
    """
    for name, v in (("dp", dp), ("tp", tp), ("pp", pp)):
        if v < 1:
            raise ModelInputError(f"project_step_s.{name} must be >= 1, got {v}")
    if tp > 1 and tp_comm is None:
        raise ModelInputError("project_step_s.tp_comm: needed when tp > 1")
    if dp > 1 and dp_comm is None:
        raise ModelInputError("project_step_s.dp_comm: needed when dp > 1")
    t = tensor_parallel_step_s(compute_s, activation_bytes, tp, tp_comm, layers=max(layers // pp, 1),
                               overlap=tp_overlap) if tp > 1 else {"step_s": compute_s, "exposed_comm_s": 0.0}
    p = pipeline_parallel_step_s(t["step_s"], pp, microbatches, p2p_s=p2p_s)
    d = data_parallel_step_s(p["step_s"], grad_bytes / (tp * pp), dp, dp_comm, overlap=dp_overlap) if dp > 1 \
        else {"step_s": p["step_s"], "exposed_comm_s": 0.0}
    return {"step_s": d["step_s"], "tp_exposed_comm_s": t["exposed_comm_s"], "bubble_fraction": p["bubble_fraction"],
            "dp_exposed_comm_s": d["exposed_comm_s"], "devices": dp * tp * pp}


def _check_frac(name: str, v: float) -> None:
    if not 0.0 <= v <= 1.0:
        raise ModelInputError(f"{name} must be in [0, 1], got {v}")
