"""Collective communication: bandwidth-ramp and alpha-beta fits, link-figure model, step-time projections.

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

**Bandwidth ramp** (:class:`CommsModel`, the model to use; alpha-beta is kept
for its callers). Measured busbw keeps rising from 256 MiB to 16 GiB (8 x H100:
422 -> 480 GB/s), which a single latency cannot produce: on the public curves
in ``data/reference/nccl_tests`` the alpha-beta fit on sizes <= 256 MiB misses
1-16 GiB busbw by 23-53%. NCCL pipelines every collective in chunks through
its rings/trees (NCCL User Guide, "Environment Variables": ``NCCL_ALGO``
Ring/Tree/NVLS/..., ``NCCL_PROTO`` LL/LL128/Simple, chosen per size by its
tuner). A message of ``X = F(n) S`` bus bytes cut into chunks of size ``c``
through a pipeline of depth ``d`` costs ``(X/c + d)(a_c + c/B)``; the best chunk,
``c* = sqrt(X a_c B / d)``, gives (the segmented-pipeline model of
Pjesivac-Grbovic et al., "Performance analysis of MPI collective operations",
Cluster Computing 10, 2007, minimised over the segment size)::

    t(S) = alpha + (sqrt(fill) + sqrt(F(n) S / B_inf))^2
         = alpha + fill + 2 sqrt(fill F S / B_inf) + F S / B_inf

three parameters: ``alpha`` (launch latency), ``fill = d a_c`` (pipeline fill)
and ``B_inf`` (asymptotic bus bandwidth). Latency, a square-root ramp,
saturation. Fitted by nonlinear least squares on ``ln t`` (relative errors:
timings span six decades), parameters on the log scale, covariance
``s^2 (J^T J)^+`` with the analytic Jacobian.

**Regimes**: NCCL switches algorithm or protocol at sizes of its tuner's
choosing; a switch shows as a drop of the local log-log slope
``d ln t / d ln S`` (which within one ramp only rises, from 0 to 1). Where the
slope drops by more than ``SWITCH_SLOPE_DROP`` = 0.5 at a size whose time is
at least 3x the latency floor, and both sides keep >= 4 distinct sizes, the
sweep is split and each regime fitted on its own; sizes beyond the sweep use
the top regime (on the 2 x A3 Mega curve: a switch at 32 MiB).

**Ceiling** (``CommsModel(max_busbw=...)``): a sweep fitted only up to a few
hundred MiB that is still ramping there can extrapolate ``B_inf`` past what
the wire carries (2 x GCP A4 B200 all_gather, fitted to 256 MiB: ``B_inf``
683 GB/s on 8 x 50 GB/s of NICs). Where the link model knows a hard bound
(:meth:`LinkModel.network_ceiling`: across domains, the NICs' line rate
through NCCL's flat ring for all_gather/reduce_scatter, and for all_reduce the
whole result entering every domain) it bounds ``B_inf`` from above in the fit.

**Intervals**: replicates (out-of-place and in-place columns, repeated
sweeps) are averaged per size before fitting, so a regime's degrees of
freedom count distinct sizes (replicates say nothing about the shape); the
prediction variance of ``ln t`` is ``g' C g + max(s2_top, s2_pooled) + s2_within``
(parameter, lack-of-fit of the top regime or of all regimes pooled, whichever
is larger, and replicate scatter), with Student t quantiles.

**Hierarchy** (:class:`LinkModel`, catalog link figures, no fit): inside one
scale-up domain (``scale_up_size`` accelerators) busbw is
``INTRA_EFFICIENCY x intra_node_unidir_bytes_per_s``; across ``N`` domains of
``k`` accelerators a collective reduces/gathers inside the domain (``F(k)``
bus bytes per byte on NVLink) and crosses the network with every accelerator's
own NIC carrying ``1/k`` of the data (``F(N)/k`` per byte at
``INTER_EFFICIENCY x inter_node_bytes_per_s_per_accelerator``), the two stages
pipelined so the slower sets the rate (NCCL's hierarchical/tree algorithms,
PXN; alltoall cannot aggregate and sendrecv crosses one NIC). all_gather and
reduce_scatter have no tree in NCCL: across domains they run one flat ring,
whose every link carries ``F(n)`` per byte, so their busbw is
``min(intra, k x NIC)`` (``RING_ACROSS_DOMAINS``). A fitted
:class:`CommsResult` projects to another rank count through the ratio of the
link model's busbw (``with_link``) and ring/tree scaling of its latencies.

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


# ------------------------------------------------------------------ bandwidth ramp model
#: a regime switch needs this many distinct sizes on each side to be accepted
MIN_REGIME_SIZES = 4
#: drop of the log-log slope d ln t / d ln S that marks a switch of NCCL algorithm/protocol
SWITCH_SLOPE_DROP = 0.5
#: ... looked for only where the time is at least this multiple of the latency floor
SWITCH_MIN_TIME_RATIO = 3.0
REGIME_MODES = ("auto", "single")


def _ramp_log_time(theta: np.ndarray, s_eff: np.ndarray) -> np.ndarray:
    """ln t for ``t = alpha + (sqrt(fill) + sqrt(s_eff / B))^2`` with ``theta = ln(alpha, fill, 1/B)``."""
    alpha, fill, inv = np.exp(theta)
    return np.log(alpha + (np.sqrt(fill) + np.sqrt(s_eff * inv)) ** 2)


def _ramp_grad(theta: np.ndarray, s_eff: np.ndarray) -> np.ndarray:
    """d ln t / d theta (rows: sizes), analytic."""
    alpha, fill, inv = np.exp(theta)
    root = np.sqrt(fill) + np.sqrt(s_eff * inv)
    t = alpha + root**2
    d_alpha = alpha / t
    d_fill = root * np.sqrt(fill) / t  # d t / d ln fill = root * sqrt(fill)
    d_inv = root * np.sqrt(s_eff * inv) / t
    return np.column_stack([d_alpha, d_fill, d_inv])


@dataclass(frozen=True)
class Regime:
    """One NCCL algorithm/protocol regime: a size range and its fitted ramp (log parameters)."""

    lo_bytes: float
    hi_bytes: float
    theta: np.ndarray  # ln alpha_s, ln fill_s, ln (1 / busbw_inf)
    cov: np.ndarray
    n: int
    dof: int
    rss: float

    @property
    def busbw_inf(self) -> float:
        return float(np.exp(-self.theta[2]))

    def to_dict(self) -> dict[str, Any]:
        a, f, inv = np.exp(self.theta)
        return {"lo_bytes": self.lo_bytes, "hi_bytes": self.hi_bytes, "alpha_s": float(a), "fill_s": float(f),
                "busbw_inf_bytes_per_s": float(1 / inv), "n": self.n, "dof": self.dof}


def _fit_regime(s_eff: np.ndarray, t: np.ndarray, max_busbw: float | None = None
                ) -> tuple[np.ndarray, np.ndarray, float, int]:
    from scipy.optimize import least_squares

    y = np.log(t)
    lb = np.log([1e-9, 1e-12, 1e-16])  # 1 ns, 1 ps, 1e16 B/s: far outside any real collective
    if max_busbw is not None:  # a physical ceiling on B_inf (CommsModel.max_busbw)
        lb[2] = -math.log(max_busbw)
    ub = np.log([10.0, 10.0, 1e-3])  # 10 s, 10 s, 1 kB/s
    best = None
    tail = np.argsort(s_eff)[-1]
    inv0 = max(t[tail] / s_eff[tail], 1e-15)
    with single_thread_blas():
        for fill0 in (1e-7, 1e-6, 1e-5, 1e-4):  # a few starts: the fill term is weakly identified
            p0 = np.clip(np.log([max(float(t.min()) / 2, 2e-9), fill0, inv0 / 1.2]), lb + 1e-6, ub - 1e-6)
            sol = least_squares(lambda p: _ramp_log_time(p, s_eff) - y, p0, bounds=(lb, ub), method="trf",
                                x_scale=1.0, max_nfev=3000)
            if best is None or sol.cost < best.cost:
                best = sol
    theta = best.x
    at_bound = tuple(bool(v) for v in (np.isclose(theta, lb, atol=1e-3) | np.isclose(theta, ub, atol=1e-3)))
    r = _ramp_log_time(theta, s_eff) - y
    rss = float(np.einsum("i,i->", r, r))
    dof = int(s_eff.size - 3)
    J = _ramp_grad(theta, s_eff)
    s2 = rss / dof if dof > 0 else math.inf
    free = ~np.array(at_bound)
    cov = np.zeros((3, 3))
    if free.any():  # a parameter pinned at its bound is held fixed: covariance of the others, conditional on it
        Jf = J[:, free]
        with single_thread_blas():
            cov[np.ix_(free, free)] = np.linalg.pinv(Jf.T @ Jf) * s2
    return theta, cov, rss, dof, at_bound


def _switch_points(sizes: np.ndarray, t_geo: np.ndarray) -> list[int]:
    """Indices (into the distinct sizes) where a new regime starts (module docstring, "Regimes")."""
    if sizes.size < 2 * MIN_REGIME_SIZES:
        return []
    slope = np.diff(np.log(t_geo)) / np.diff(np.log(sizes))
    floor = float(t_geo.min())
    starts = []
    for i in range(1, slope.size):
        if t_geo[i] >= SWITCH_MIN_TIME_RATIO * floor and slope[i] < slope[i - 1] - SWITCH_SLOPE_DROP:
            start = i + 1
            prev = starts[-1] if starts else 0
            if start - prev >= MIN_REGIME_SIZES and sizes.size - start >= MIN_REGIME_SIZES:
                starts.append(start)
    return starts


@dataclass(frozen=True, eq=False)
class CommsResult(FitResult):
    """A fitted bandwidth ramp: the top regime's parameters (``params``), every regime, prediction tools."""

    collective: str = "all_reduce"
    ranks: float = 2.0
    latency_scaling: str = "ring"
    regimes: tuple[Regime, ...] = ()
    s2_pred: float = 0.0
    fit_max_bytes: float = 0.0
    link: Any = None  # LinkModel used to project busbw to other rank counts (None: busbw kept)

    # -- parameters in natural units -----------------------------------------------------
    @property
    def alpha_s(self) -> float:
        return float(np.exp(self.values[0]))

    @property
    def fill_s(self) -> float:
        return float(np.exp(self.values[1]))

    @property
    def busbw_inf(self) -> float:
        """Asymptotic bus bandwidth (B/s) of the top regime."""
        return float(np.exp(-self.values[2]))

    def conf_int(self, alpha: float = 0.05) -> dict[str, tuple[float, float]]:
        """``1-alpha`` intervals of alpha_s, fill_s and busbw_inf (Wald on the log scale, exponentiated)."""
        alpha = check_alpha(alpha)
        q = t_quantile(1 - alpha / 2, self.dof)
        se = np.sqrt(np.maximum(np.diag(self.cov), 0.0))
        v = self.values
        with np.errstate(over="ignore"):
            lo, hi = np.exp(v - q * se), np.exp(v + q * se)
        return {"alpha_s": (float(lo[0]), float(hi[0])), "fill_s": (float(lo[1]), float(hi[1])),
                "busbw_inf_bytes_per_s": (float(1 / hi[2]), float(1 / lo[2]))}

    def with_link(self, link: Any) -> CommsResult:
        """A copy that projects to other rank counts with ``link`` (a :class:`LinkModel` or catalog node)."""
        from dataclasses import replace

        return replace(self, link=link if isinstance(link, LinkModel) else LinkModel.from_node(link))

    # -- prediction -------------------------------------------------------------------------
    def _regime_for(self, s: float) -> Regime:
        for reg in self.regimes:
            if s <= reg.hi_bytes:
                return reg
        return self.regimes[-1]

    def _scales(self, n: float) -> tuple[float, float]:
        """(latency factor, busbw factor) from the fitted rank count to ``n``."""
        n0 = float(self.ranks)
        if n == n0:
            return 1.0, 1.0
        if self.latency_scaling == "ring":
            lat = (n - 1) / (n0 - 1) if n0 > 1 else 1.0
        elif self.latency_scaling == "tree":
            lat = math.log2(max(n, 2)) / math.log2(max(n0, 2))
        else:
            lat = 1.0
        bw = 1.0 if self.link is None else self.link.busbw_inf(self.collective, n) / self.link.busbw_inf(
            self.collective, n0)
        return lat, bw

    def predict(self, size_bytes: Any, ranks: float | None = None, *, alpha: float = 0.05) -> dict[str, np.ndarray]:
        """Time and busbw at ``size_bytes`` with ``1-alpha`` intervals.

        ``time_lo/hi``: confidence interval of the mean time (parameter
        uncertainty); ``pred_lo/hi``: prediction interval of one measured
        sweep point (adds the residual scatter, module docstring).
        ``busbw_lo/hi`` are the prediction interval mapped to busbw.
        """
        alpha = check_alpha(alpha)
        n = self.ranks if ranks is None else float(ranks)
        if n < 1:
            raise ModelInputError(f"ranks must be >= 1, got {ranks}")
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        if np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise ModelInputError("size_bytes: values must be finite and > 0")
        f = busbw_factor(self.collective, n)
        lat, bw = self._scales(n)
        shift = np.log([lat, lat, 1.0 / bw])
        lt = np.empty_like(s)
        var_mean = np.empty_like(s)
        dof = np.empty_like(s)
        for i, si in enumerate(s):
            reg = self._regime_for(si)
            theta = reg.theta + shift
            x = np.array([f * si])
            lt[i] = _ramp_log_time(theta, x)[0]
            g = _ramp_grad(theta, x)[0]
            var_mean[i] = float(g @ reg.cov @ g)
            dof[i] = reg.dof
        q = np.array([t_quantile(1 - alpha / 2, d) for d in dof])
        se_m = np.sqrt(np.maximum(var_mean, 0))
        se_p = np.sqrt(np.maximum(var_mean + self.s2_pred, 0))
        t = np.exp(lt)
        out = {"size": s, "time_s": t, "time_lo": np.exp(lt - q * se_m), "time_hi": np.exp(lt + q * se_m),
               "pred_lo": np.exp(lt - q * se_p), "pred_hi": np.exp(lt + q * se_p)}
        out["busbw"] = f * s / t
        out["busbw_lo"] = f * s / out["pred_hi"]
        out["busbw_hi"] = f * s / out["pred_lo"]
        out["extrapolated"] = s > self.fit_max_bytes
        return out

    def predict_time(self, size_bytes: Any, ranks: float | None = None) -> np.ndarray:
        return self.predict(size_bytes, ranks)["time_s"]

    def predict_busbw(self, size_bytes: Any, ranks: float | None = None) -> np.ndarray:
        return self.predict(size_bytes, ranks)["busbw"]

    def summary(self, alpha: float = 0.05) -> str:
        ci = self.conf_int(alpha)
        lines = [f"{self.model}: {self.collective} on {self.ranks:g} ranks, n={self.n}, {len(self.regimes)} regime(s), "
                 f"top regime {self.regimes[-1].lo_bytes:.4g}-{self.regimes[-1].hi_bytes:.4g} B (dof {self.dof})",
                 f"  t(S) = alpha + (sqrt(fill) + sqrt(F S / B_inf))^2, F = {busbw_factor(self.collective, self.ranks):.4g}"]
        lines.append(f"  alpha   {self.alpha_s * 1e6:10.4g} us   [{ci['alpha_s'][0] * 1e6:.4g}, {ci['alpha_s'][1] * 1e6:.4g}]")
        lines.append(f"  fill    {self.fill_s * 1e6:10.4g} us   [{ci['fill_s'][0] * 1e6:.4g}, {ci['fill_s'][1] * 1e6:.4g}]")
        b = ci["busbw_inf_bytes_per_s"]
        lines.append(f"  B_inf   {self.busbw_inf / 1e9:10.4g} GB/s [{b[0] / 1e9:.4g}, {b[1] / 1e9:.4g}] (bus bandwidth)")
        lines.append(f"  residual sd (ln t) {math.sqrt(self.s2_pred):.3g}; intervals {1 - alpha:.0%}")
        if self.meta.get("at_bound"):
            lines.append(f"  at the search bound (held fixed there; its interval is not an estimate): {', '.join(self.meta['at_bound'])}")
        return "\n".join(lines)

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        return {"model": self.model, "collective": self.collective, "ranks": self.ranks,
                "latency_scaling": self.latency_scaling, "alpha_s": self.alpha_s, "fill_s": self.fill_s,
                "busbw_inf_bytes_per_s": self.busbw_inf,
                "conf_int": {k: list(v) for k, v in self.conf_int(alpha).items()}, "level": 1 - alpha,
                "residual_sd_log_time": math.sqrt(self.s2_pred), "n": self.n, "dof": self.dof,
                "fit_max_bytes": self.fit_max_bytes, "regimes": [r.to_dict() for r in self.regimes],
                "link": None if self.link is None else self.link.to_dict()}


@dataclass(frozen=True, kw_only=True)
class CommsModel:
    """``CommsModel(collective="all_reduce").fit(size_bytes, busbw=..., ranks=8)`` (or ``time_s=``).

    ``regimes="auto"`` splits the sweep where NCCL visibly switches algorithm
    or protocol (module docstring, "Regimes"); ``"single"`` fits one ramp.
    ``min_size_bytes`` / ``max_size_bytes`` restrict the sizes used.
    ``max_busbw`` (B/s) bounds every regime's ``B_inf`` from above: a physical
    ceiling such as :meth:`LinkModel.network_ceiling` (a flat ring across
    domains cannot beat its NICs' line rate). Without it a sweep that stops
    while still ramping can extrapolate past the wire (module docstring,
    "Ceiling").
    """

    collective: str = "all_reduce"
    regimes: str = "auto"
    latency_scaling: str = "ring"
    min_size_bytes: float = 0.0
    max_size_bytes: float = math.inf
    max_busbw: float | None = None

    def __post_init__(self) -> None:
        if self.max_busbw is not None and not (math.isfinite(self.max_busbw) and self.max_busbw > 0):
            raise ModelInputError(f"comms.max_busbw must be a positive number of bytes/s, got {self.max_busbw!r}")
        if self.collective not in BUSBW_FACTORS:
            raise choices_error("comms.collective", self.collective, BUSBW_FACTORS)
        if self.regimes not in REGIME_MODES:
            raise choices_error("comms.regimes", self.regimes, REGIME_MODES)
        if self.latency_scaling not in LATENCY_SCALINGS:
            raise choices_error("comms.latency_scaling", self.latency_scaling, LATENCY_SCALINGS)
        if not 0 <= self.min_size_bytes < self.max_size_bytes:
            raise ModelInputError("comms.min_size_bytes must be >= 0 and below max_size_bytes")

    def fit(self, size_bytes: Any, busbw: Any = None, *, ranks: float, time_s: Any = None,
            link: Any = None) -> CommsResult:
        s = as_float_array(size_bytes, "size")
        f = busbw_factor(self.collective, ranks)
        if (busbw is None) == (time_s is None):
            raise ModelInputError("comms.fit: give exactly one of busbw= or time_s=")
        if busbw is not None:
            b = as_float_array(busbw, "busbw")
            if b.size != s.size:
                raise ModelInputError(f"comms.fit: {s.size} sizes but {b.size} busbw values")
            keep = b > 0  # nccl-tests prints 0.00 below its resolution: those rows carry no bandwidth
            s, t = s[keep], f * s[keep] / b[keep]
        else:
            t = as_float_array(time_s, "time_s")
            if t.size != s.size:
                raise ModelInputError(f"comms.fit: {s.size} sizes but {t.size} times")
        if np.any(s <= 0) or np.any(t <= 0):
            raise ModelInputError("comms.fit: sizes and times must be > 0")
        sel = (s >= self.min_size_bytes) & (s <= self.max_size_bytes)
        s, t = s[sel], t[sel]
        sizes, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
        if sizes.size < 3 or s.size < 4:
            raise ModelInputError(f"comms.fit: needs at least 4 measurements at 3 distinct sizes, got {s.size} at "
                                  f"{sizes.size} (check min_size_bytes/max_size_bytes)")
        lt = np.log(t)
        lt_geo = np.bincount(inverse, weights=lt) / counts  # replicates -> geometric mean per size
        t_geo = np.exp(lt_geo)
        starts = _switch_points(sizes, t_geo) if self.regimes == "auto" else []
        bounds = [0, *starts, sizes.size]
        regimes = []
        rss_tot, dof_tot = 0.0, 0
        # replicates (in-place and out-of-place, repeated sweeps) are averaged per size first: they say
        # nothing about the curve's shape, so the regime's dof counts distinct sizes (module docstring)
        dev = lt - lt_geo[inverse]
        dof_within = int(s.size - sizes.size)
        s2_within = float(np.einsum("i,i->", dev, dev) / dof_within) if dof_within > 0 else 0.0
        for a, b in zip(bounds[:-1], bounds[1:]):
            theta, cov, rss, dof, at_bound = _fit_regime(f * sizes[a:b], t_geo[a:b], self.max_busbw)
            regimes.append(Regime(lo_bytes=float(sizes[a]), hi_bytes=float(sizes[b - 1]), theta=theta, cov=cov,
                                  n=int(b - a), dof=dof, rss=rss))
            rss_tot += rss
            dof_tot += max(dof, 0)
        top = regimes[-1]
        s2_top = top.rss / top.dof if top.dof > 0 else math.inf
        s2_pool = rss_tot / dof_tot if dof_tot > 0 else math.inf
        s2_pred = max(s2_top, s2_pool) + s2_within
        res = CommsResult(model=f"comms_ramp[{self.collective}]", names=("ln_alpha_s", "ln_fill_s", "ln_inv_busbw"),
                          values=top.theta, cov=top.cov, n=int(s.size), dof=top.dof, rss=top.rss,
                          meta={"fit_space": "ln time", "regimes": len(regimes), "max_busbw": self.max_busbw,
                                "switches_at_bytes": [float(sizes[i]) for i in starts],
                                "at_bound": [n for n, hit in zip(("alpha_s", "fill_s", "busbw_inf_bytes_per_s"),
                                                                 at_bound) if hit]},
                          collective=self.collective, ranks=float(ranks), latency_scaling=self.latency_scaling,
                          regimes=tuple(regimes), s2_pred=float(s2_pred),
                          fit_max_bytes=float(sizes[-1]))
        return res.with_link(link) if link is not None else res


# ------------------------------------------------------------------ hierarchical link model (catalog figures)
#: NCCL's effective NVLink bandwidth is ~370 of 450 GB/s line rate on H100 ("protocol overhead ~20%"):
#: S. Jeaugey (NCCL maintainer), NVIDIA/nccl-tests#212, 2024-05-06 -> 370/450; 8 x H200 with NVLink SHARP
#: disabled measures 367.61 GB/s (stas00/ml-engineering network/benchmarks/results/all-reduce-8xH200.md).
#: NVLS (in-switch reduction) all_reduce goes above this (~480 GB/s): the link model does not model NVLS.
INTRA_EFFICIENCY = 370.0 / 450.0
#: NVIDIA/nccl-tests#119 (2022-11-17): 3 x 8 A100 with 4 x HDR 200 Gb/s per node measured 84.8 GB/s average and
#: 96 peak busbw of 100 theoretical, and the NCCL maintainer: "24GB/s is the peak performance per 200G NIC"
#: (0.96 of 25 GB/s). 0.9 sits between the measured average and that peak; AWS EFA curves come out near it.
INTER_EFFICIENCY = 0.9
#: small-message latency floors read off public nccl-tests all_reduce logs (data/reference/nccl_tests):
#: 8 x H100 NVSwitch 13-20 us for 8 B-512 KiB; 2 x p5.48xlarge (EFA) 65-79 us for 8 B-4 KiB
INTRA_ALPHA_S = 20e-6
INTER_ALPHA_S = 70e-6
#: pipeline-fill terms of the same two logs' ramp fits (benchmarks/comms_validation.py)
INTRA_FILL_S = 8e-6
INTER_FILL_S = 80e-6
INTER_ALGORITHMS = ("tree", "ring")
#: collectives NCCL runs across domains as one flat ring (no hierarchy): its Tree/NVLSTree algorithms "only apply to
#: allreduce (they could also probably apply to broadcast / reduce, but not to reducescatter/allgather)" (S. Jeaugey,
#: NVIDIA/nccl#1413, 2024-08-23; again NVIDIA/nccl#1473, 2024-10-09, where PAT, NCCL 2.23, is the only alternative
#: and "only support[s] one GPU per node"). A flat ring crosses each domain boundary with (n-1)/n of the data per
#: channel, one channel per NIC, so across domains busbw = min(intra, k x NIC): half the hierarchical bound at
#: two domains (public curves: 2 x A3 Mega all_gather 188.8 GB/s busbw = 0.94 x the 8 x 25 GB/s NICs, where the
#: same system's tree all_reduce reaches 338.8 GB/s; 2 x GCP A4 B200 376.4 GB/s = 0.94 x 8 x 50 GB/s).
RING_ACROSS_DOMAINS = ("all_gather", "reduce_scatter")


@dataclass(frozen=True, kw_only=True)
class LinkModel:
    """Collective time from link figures alone, hierarchical over the scale-up domain and the scale-out network.

    Within one scale-up domain (``scale_up_size`` accelerators on NVLink/NVSwitch
    or similar) every collective runs at ``intra_efficiency x intra_bytes_per_s``
    of bus bandwidth. Across ``N`` domains of ``k`` accelerators NCCL-style
    hierarchical collectives reduce/gather inside the domain and cross the
    network with each accelerator's own NIC carrying ``1/k`` of the data, the
    two stages pipelined, so the slower stage sets the time (module docstring,
    "Hierarchy").
    """

    intra_bytes_per_s: float
    inter_bytes_per_s: float
    accelerators_per_node: int
    scale_up_size: int | None = None
    intra_efficiency: float = INTRA_EFFICIENCY
    inter_efficiency: float = INTER_EFFICIENCY
    intra_alpha_s: float = INTRA_ALPHA_S
    inter_alpha_s: float = INTER_ALPHA_S
    intra_fill_s: float = INTRA_FILL_S
    inter_fill_s: float = INTER_FILL_S
    inter_algorithm: str = "tree"
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("intra_bytes_per_s", "inter_bytes_per_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ModelInputError(f"link.{name} must be a positive number of bytes/s, got {v!r}")
        if self.accelerators_per_node < 1:
            raise ModelInputError(f"link.accelerators_per_node must be >= 1, got {self.accelerators_per_node}")
        if self.scale_up_size is not None and self.scale_up_size < 1:
            raise ModelInputError(f"link.scale_up_size must be >= 1, got {self.scale_up_size}")
        for name in ("intra_efficiency", "inter_efficiency"):
            if not 0 < getattr(self, name) <= 1.5:
                raise ModelInputError(f"link.{name} must be in (0, 1.5], got {getattr(self, name)}")
        if self.inter_algorithm not in INTER_ALGORITHMS:
            raise choices_error("link.inter_algorithm", self.inter_algorithm, INTER_ALGORITHMS)

    @classmethod
    def from_node(cls, node: Any, **overrides: Any) -> LinkModel:
        """From a catalog node type (``hwmodels.catalog.NodeType``), one direction per accelerator."""
        if node is None:
            raise ModelInputError("link: no node given")
        k = int(getattr(node, "accelerators_per_node", 0) or 0)
        if k < 1:
            raise ModelInputError(f"link: node {getattr(node, 'id', node)!r} has no accelerators_per_node")
        intra = getattr(node, "intra_node_unidir_bytes_per_s", 0.0) or 0.0
        if not intra:  # older catalog: the datasheet figure (NVIDIA states NVLink both directions summed)
            intra = float(getattr(node, "intra_node_bytes_per_s", 0.0)) / 2.0
        inter = getattr(node, "inter_node_bytes_per_s_per_accelerator", 0.0) or 0.0
        if not inter:
            inter = float(getattr(node, "inter_node_bytes_per_s", 0.0)) / k
        kw: dict[str, Any] = {"intra_bytes_per_s": float(intra), "inter_bytes_per_s": float(inter),
                              "accelerators_per_node": k,
                              "scale_up_size": int(getattr(node, "scale_up_size", 0) or k),
                              "source": f"catalog {getattr(node, 'id', '?')} [links]"}
        kw.update(overrides)
        return cls(**kw)

    @property
    def domain(self) -> int:
        return int(self.scale_up_size or self.accelerators_per_node)

    def levels(self, ranks: float) -> tuple[int, int]:
        """(accelerators per domain used, domains) for ``ranks``."""
        n = int(round(ranks))
        if n < 1:
            raise ModelInputError(f"ranks must be >= 1, got {ranks}")
        d = self.domain
        return (n, 1) if n <= d else (d, math.ceil(n / d))

    def busbw_inf(self, collective: str, ranks: float) -> float:
        """Asymptotic bus bandwidth (B/s) of ``collective`` on ``ranks``."""
        f_n = busbw_factor(collective, ranks)
        k, nodes = self.levels(ranks)
        bi = self.intra_efficiency * self.intra_bytes_per_s
        if nodes == 1:
            return bi
        bn = self.inter_efficiency * self.inter_bytes_per_s
        n = float(ranks)
        if collective == "alltoall":
            per_byte = max((k - 1) / n / bi, (n - k) / n / bn)  # no aggregation: each NIC sends its own share
        elif collective == "sendrecv":
            per_byte = 1.0 / bn  # a pair across domains meets on one NIC
        elif collective in RING_ACROSS_DOMAINS:
            # one flat ring over all n ranks: every rank's link, NVLink or its own NIC, carries F(n) S
            per_byte = max(f_n / bi if k > 1 else 0.0, f_n / k / bn)
        else:
            per_byte = max(busbw_factor(collective, k) / bi if k > 1 else 0.0,
                           busbw_factor(collective, nodes) / k / bn)
        return f_n / per_byte

    def network_ceiling(self, collective: str, ranks: float) -> float | None:
        """Line-rate ceiling (B/s) on the busbw of ``collective`` on ``ranks``, or None where there is none.

        Line rate (efficiency 1) of the domain's ``k`` NICs, ``B = k x
        inter_bytes_per_s``, across domains only:

        * all_gather / reduce_scatter (``RING_ACROSS_DOMAINS``): NCCL's flat
          ring sends ``F(n)`` per byte through the NICs, so busbw <= ``B``;
        * all_reduce: every domain must receive the whole ``S``-byte result,
          whatever the algorithm (ring, tree, or SHARP reducing in the
          switches), so ``t >= S / B`` and busbw <= ``F(n) B``.

        Inside one domain no ceiling is claimed (in-switch NVLS reductions and
        multicast beat the links' ring bound: 8 x H100 NVLS all_reduce reaches
        ~480 GB/s busbw on 450 GB/s links); nor for the other collectives.
        """
        k, nodes = self.levels(ranks)
        if nodes == 1:
            return None
        if collective in RING_ACROSS_DOMAINS:
            return k * self.inter_bytes_per_s
        if collective == "all_reduce":
            return busbw_factor(collective, ranks) * k * self.inter_bytes_per_s
        return None

    def latency(self, ranks: float) -> tuple[float, float]:
        """(alpha_s, fill_s): intra-domain figures, or the network's scaled with the domain count.

        Across domains the latency grows with the hops of the inter-domain
        algorithm: ``log2 N`` for a (double binary) tree, ``N - 1`` for a ring
        (NCCL User Guide, ``NCCL_ALGO``: Tree for latency at scale, Ring for
        bandwidth); the bandwidth term is the same for both (module docstring).
        """
        _, nodes = self.levels(ranks)
        if nodes == 1:
            return self.intra_alpha_s, self.intra_fill_s
        g = max(1.0, math.log2(nodes)) if self.inter_algorithm == "tree" else float(nodes - 1)
        return self.inter_alpha_s * g, self.inter_fill_s * g

    def predict_time(self, collective: str, size_bytes: Any, ranks: float) -> np.ndarray:
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        if np.any(~np.isfinite(s)) or np.any(s <= 0):
            raise ModelInputError("size_bytes: values must be finite and > 0")
        a, fill = self.latency(ranks)
        b = self.busbw_inf(collective, ranks)
        theta = np.log([a, fill, 1.0 / b])
        return np.exp(_ramp_log_time(theta, busbw_factor(collective, ranks) * s))

    def predict_busbw(self, collective: str, size_bytes: Any, ranks: float) -> np.ndarray:
        s = np.atleast_1d(np.asarray(size_bytes, dtype=float))
        return busbw_factor(collective, ranks) * s / self.predict_time(collective, s, ranks)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("intra_bytes_per_s", "inter_bytes_per_s", "accelerators_per_node",
                                              "scale_up_size", "intra_efficiency", "inter_efficiency",
                                              "intra_alpha_s", "inter_alpha_s", "intra_fill_s", "inter_fill_s",
                                              "inter_algorithm", "source")}


#: relative error band of the link-only model, from its misses on the public curves
#: (benchmarks/README.md, "Communication"): used as its interval since it has no fit
LINK_MODEL_REL_ERROR = 0.35


def collective_time_s(kind: str, size_bytes: float, ranks: float, *, level: float = 0.9,
                      model_or_link: Any) -> dict[str, Any]:
    """Time of one ``kind`` collective of ``size_bytes`` on ``ranks``, with a ``level`` interval.

    ``model_or_link``: a fitted :class:`CommsResult` (its prediction interval),
    an :class:`AlphaBetaResult` (interval of the mean only), a :class:`LinkModel`
    or a catalog node type (link figures; the interval is the link model's
    validation error, ``LINK_MODEL_REL_ERROR``). Returns ``time_s``, ``lo``,
    ``hi``, ``busbw``, ``level`` and ``method``.
    """
    if kind not in BUSBW_FACTORS:
        raise choices_error("collective", kind, BUSBW_FACTORS)
    alpha = check_alpha(1.0 - float(level), "level")
    if not (math.isfinite(float(size_bytes)) and float(size_bytes) > 0):
        raise ModelInputError(f"size_bytes must be > 0, got {size_bytes!r}")
    f = busbw_factor(kind, ranks)
    m = model_or_link
    if isinstance(m, CommsResult | AlphaBetaResult):
        if m.collective != kind:
            raise ModelInputError(f"model_or_link: fitted on {m.collective}, asked for {kind}")
        p = m.predict(size_bytes, ranks, alpha=alpha)
        lo, hi = (p["pred_lo"], p["pred_hi"]) if "pred_lo" in p else (p["time_lo"], p["time_hi"])
        t = float(p["time_s"][0])
        method = "comms_ramp fit (prediction interval)" if isinstance(m, CommsResult) else \
            "alpha-beta fit (interval of the mean)"
        return {"time_s": t, "lo": float(lo[0]), "hi": float(hi[0]), "busbw": f * float(size_bytes) / t,
                "level": float(level), "method": method}
    link = m if isinstance(m, LinkModel) else LinkModel.from_node(m)
    t = float(link.predict_time(kind, size_bytes, ranks)[0])
    r = LINK_MODEL_REL_ERROR
    return {"time_s": t, "lo": t / (1 + r), "hi": t * (1 + r), "busbw": f * float(size_bytes) / t,
            "level": float(level), "method": f"link model ({link.source or 'link figures'}), +/-{r:.0%} band"}


# ------------------------------------------------------------------ projections
def data_parallel_step_s(compute_s: float, grad_bytes: float, dp: int, comm: AlphaBetaResult | CommsResult, *,
                         overlap: float = 1.0, backward_fraction: float = BACKWARD_FRACTION) -> dict[str, float]:
    """DDP step: compute plus the all-reduce not hidden behind backward (module docstring)."""
    _check_frac("overlap", overlap)
    if dp <= 1:
        return {"step_s": compute_s, "compute_s": compute_s, "comm_s": 0.0, "exposed_comm_s": 0.0}
    t_comm = float(comm.predict_time(grad_bytes, dp)[0])
    exposed = max(0.0, t_comm - overlap * backward_fraction * compute_s)
    return {"step_s": compute_s + exposed, "compute_s": compute_s, "comm_s": t_comm, "exposed_comm_s": exposed}


def tensor_parallel_step_s(compute_s: float, activation_bytes: float, tp: int, comm: AlphaBetaResult | CommsResult, *,
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
                   dp_comm: AlphaBetaResult | CommsResult | None = None,
                   tp_comm: AlphaBetaResult | CommsResult | None = None,
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
