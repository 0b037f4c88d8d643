"""Roofline: compute ceilings per dtype, memory ceilings per cache level, and placement.

Model (Williams, Waterman & Patterson, "Roofline: an insightful visual
performance model for multicore architectures", CACM 52(4), 2009)::

    attainable(I) = min(P_peak, I * B)        I = flops / bytes (arithmetic intensity)
    ridge intensity = P_peak / B

Equivalently a kernel doing ``F`` flops and moving ``Q`` bytes takes at least
``t = max(F / P, Q / B)``. Two fits:

* ``method="envelope"`` (default): ``P_d = max_i F_i/t_i`` over the rows of
  dtype ``d`` and ``B_l = max_i Q_i/t_i`` over the rows of level ``l`` -- every
  measurement is a lower bound on the ceiling it touches, so the envelope is
  the tightest ceiling the data proves. ``conf_int`` is one-sided: ``[max, inf)``.
* ``method="lsq"``: for kernels built to hit the roof (GEMM, STREAM), fit
  ``ln t_i = ln max(F_i/P_{d(i)}, Q_i/B_{l(i)}) + e_i``, ``e ~ N(0, s^2)``
  (multiplicative timing noise) by least squares in ``ln P``, ``ln B``; Wald
  intervals on the log parameters, exponentiated. A ceiling no row is bound by
  is reported as the envelope lower bound with an infinite upper end.

``place(points)`` puts each kernel at its intensity and reports the fraction
of the fitted ceiling and of the datasheet ceiling (``NodeType`` dense peak
for the dtype and its memory bandwidth) it achieves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import single_thread_blas, t_quantile

METHODS = ("envelope", "lsq")


def fma_ceiling(peak_flops_per_s: float, fma_fraction: float) -> float:
    """Compute ceiling of a kernel whose FP instructions are a fraction ``f`` FMAs.

    The datasheet peak counts every instruction as an FMA (2 FLOP); with a
    fraction ``f`` of FMAs and ``1-f`` single-FLOP instructions at the same
    issue rate the reachable rate is ``peak * (2f + (1-f)) / 2 = peak * (1+f)/2``
    (Yang, "8 Steps to 3.7 TFLOP/s on NVIDIA V100 GPU", arXiv:2008.11326, 2020:
    6.7 TFLOP/s x (1+0.58)/2 = 5.3 TFLOP/s).
    """
    if not 0.0 <= fma_fraction <= 1.0:
        raise ModelInputError(f"fma_fraction must be in [0, 1], got {fma_fraction}")
    return peak_flops_per_s * (1.0 + fma_fraction) / 2.0


def _frame(data: Any, dtype: str | None, level: str | None):
    import pandas as pd

    if isinstance(data, dict):
        data = pd.DataFrame(data)
    if not hasattr(data, "columns"):
        raise ModelInputError("roofline data: expected a DataFrame or a dict of arrays with flops, bytes, seconds")
    for c in ("flops", "bytes", "seconds"):
        if c not in data.columns:
            raise ModelInputError(f"roofline data: no column {c!r}; columns present: {', '.join(map(str, data.columns))}")
    df = pd.DataFrame({c: pd.to_numeric(data[c], errors="coerce").astype(float) for c in ("flops", "bytes", "seconds")})
    df["dtype"] = data["dtype"].astype(str).to_numpy() if "dtype" in data.columns else (dtype or "default")
    df["level"] = data["level"].astype(str).to_numpy() if "level" in data.columns else (level or "dram")
    bad = ~np.isfinite(df[["flops", "bytes", "seconds"]].to_numpy()).all(axis=1)
    if bad.any():
        raise ModelInputError(f"roofline data: {int(bad.sum())} row(s) with non-numeric flops/bytes/seconds "
                              f"(first at row {int(np.argmax(bad))})")
    if (df["seconds"] <= 0).any() or (df["flops"] < 0).any() or (df["bytes"] < 0).any():
        raise ModelInputError("roofline data: seconds must be > 0 and flops, bytes >= 0")
    return df


@dataclass(frozen=True, eq=False)
class RooflineResult:
    method: str
    compute: dict[str, float]
    memory: dict[str, float]
    compute_ci: dict[str, tuple[float, float]]
    memory_ci: dict[str, tuple[float, float]]
    n: int
    alpha: float = 0.05
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, float]:
        out = {f"peak_flops_per_s[{d}]": v for d, v in self.compute.items()}
        out.update({f"bytes_per_s[{l}]": v for l, v in self.memory.items()})
        return out

    def conf_int(self, alpha: float | None = None) -> dict[str, tuple[float, float]]:
        """``1-alpha`` intervals (lsq: Wald on the log ceilings; envelope: one-sided ``[max, inf)``)."""
        cc, mc = self.compute_ci, self.memory_ci
        if alpha is not None and self.method == "lsq" and abs(alpha - self.alpha) > 1e-12:
            if not 0 < alpha < 1:
                raise ModelInputError(f"alpha must be in (0, 1), got {alpha}")
            q = t_quantile(1 - alpha / 2, self.meta["dof"])
            se = self.meta["log_se"]

            def ci(name, v):
                if not math.isfinite(se[name]):
                    return (v, math.inf)
                return (v * math.exp(-q * se[name]), v * math.exp(q * se[name]))

            cc = {d: ci(d, v) for d, v in self.compute.items()}
            mc = {l: ci(l, v) for l, v in self.memory.items()}
        out = {f"peak_flops_per_s[{d}]": v for d, v in cc.items()}
        out.update({f"bytes_per_s[{l}]": v for l, v in mc.items()})
        return out

    @property
    def peak_flops_per_s(self) -> float:
        """Highest compute ceiling (over dtypes)."""
        return max(self.compute.values())

    @property
    def peak_bytes_per_s(self) -> float:
        """Lowest memory ceiling (the outermost level: the classic DRAM roof)."""
        return min(self.memory.values())

    @property
    def ridge_intensity(self) -> float:
        return self.peak_flops_per_s / self.peak_bytes_per_s

    def attainable(self, intensity: Any, dtype: str | None = None, level: str | None = None) -> np.ndarray:
        """``min(P, I * B)`` in flop/s at ``intensity`` flop/byte (default: top dtype, outer level)."""
        P = self._get(self.compute, dtype, "dtype") if dtype else self.peak_flops_per_s
        B = self._get(self.memory, level, "level") if level else self.peak_bytes_per_s
        i = np.asarray(intensity, dtype=float)
        return np.minimum(P, i * B)

    predict = attainable

    @staticmethod
    def _get(d: dict[str, float], key: str, what: str) -> float:
        if key not in d:
            raise choices_error(what, key, d)
        return d[key]

    def place(self, points: Any, node: Any = None):
        """Each row's intensity, achieved flop/s, and efficiency vs the fitted and datasheet ceilings."""
        df = _frame(points, None, None)
        I = np.where(df["bytes"] > 0, df["flops"] / df["bytes"].where(df["bytes"] > 0, 1), np.inf)
        perf = df["flops"] / df["seconds"]
        P = df["dtype"].map(lambda d: self.compute.get(d, math.nan)).astype(float)
        B = df["level"].map(lambda l: self.memory.get(l, math.nan)).astype(float)
        att = np.minimum(P, I * B)
        out = df.copy()
        out["intensity"] = I
        out["achieved_flops_per_s"] = perf
        out["attainable_fit_flops_per_s"] = att
        out["efficiency_fit"] = perf / att
        out["bound"] = np.where(I * B < P, "memory", "compute")
        if node is not None:
            def ds_peak(d):
                try:
                    return node.peak_flops_per_s(d)
                except ValueError:
                    return math.nan
            Pd = df["dtype"].map(ds_peak).astype(float)
            Bd = np.where(df["level"].isin(["dram", "hbm", "memory"]), node.memory_bandwidth_bytes_per_s, math.nan)
            attd = np.minimum(Pd, I * Bd)
            out["attainable_datasheet_flops_per_s"] = attd
            out["efficiency_datasheet"] = perf / attd
        return out

    def summary(self) -> str:
        lines = [f"roofline ({self.method}, n={self.n}); ridge {self.ridge_intensity:.4g} flop/B"]
        ci = self.conf_int()
        for k, v in self.params.items():
            lo, hi = ci[k]
            lines.append(f"  {k:<28} {v:.4g}   [{lo:.4g}, {hi:.4g}]")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "peak_flops_per_s": self.peak_flops_per_s,
                "peak_bytes_per_s": self.peak_bytes_per_s, "ridge_intensity": self.ridge_intensity,
                "compute_ceilings": self.compute, "memory_ceilings": self.memory,
                "conf_int": {k: list(v) for k, v in self.conf_int().items()}, "alpha": self.alpha, "n": self.n}


@dataclass(frozen=True, kw_only=True)
class Roofline:
    """``Roofline(method="envelope"|"lsq").fit(df with flops, bytes, seconds[, dtype, level])``."""

    method: str = "envelope"
    alpha: float = 0.05
    dtype: str | None = None
    level: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise choices_error("roofline.method", self.method, METHODS)
        if not 0 < self.alpha < 1:
            raise ModelInputError(f"roofline.alpha must be in (0, 1), got {self.alpha}")

    def fit(self, data: Any = None, **arrays: Any) -> RooflineResult:
        if data is None:
            data = arrays
        df = _frame(data, self.dtype, self.level)
        if df.empty:
            raise ModelInputError("roofline data: no rows")
        dts = df["dtype"].to_numpy()
        lvs = df["level"].to_numpy()
        F, Q, t = (df[c].to_numpy() for c in ("flops", "bytes", "seconds"))
        env_P = {d: float((F[dts == d] / t[dts == d]).max()) for d in dict.fromkeys(dts)}
        env_B = {l: float((Q[lvs == l] / t[lvs == l]).max()) for l in dict.fromkeys(lvs)}
        if any(v <= 0 for v in env_P.values()) or any(v <= 0 for v in env_B.values()):
            raise ModelInputError("roofline data: every dtype needs a row with flops > 0 and every level one with bytes > 0")
        if self.method == "envelope":
            return RooflineResult("envelope", env_P, env_B, {d: (v, math.inf) for d, v in env_P.items()},
                                  {l: (v, math.inf) for l, v in env_B.items()}, int(len(df)), self.alpha)
        return self._lsq(F, Q, t, dts, lvs, env_P, env_B)

    def _lsq(self, F, Q, t, dts, lvs, env_P, env_B) -> RooflineResult:
        from scipy.optimize import least_squares

        dnames, lnames = list(env_P), list(env_B)
        di = np.array([dnames.index(d) for d in dts])
        li = np.array([lnames.index(l) for l in lvs])
        nd = len(dnames)
        lt = np.log(t)
        with np.errstate(divide="ignore"):
            lF, lQ = np.log(F), np.log(Q)

        def model(th):
            return np.maximum(lF - th[di], lQ - th[nd + li])

        def resid(th):
            return lt - model(th)

        def jac(th):
            comp = (lF - th[di]) >= (lQ - th[nd + li])
            Jr = np.zeros((t.size, th.size))
            rows = np.arange(t.size)
            Jr[rows[comp], di[comp]] = 1.0  # d resid / d ln P = +1 where compute-bound
            Jr[rows[~comp], nd + li[~comp]] = 1.0
            return Jr

        th0 = np.log(np.array([env_P[d] for d in dnames] + [env_B[l] for l in lnames]))
        with single_thread_blas():
            sol = least_squares(resid, th0, jac=jac, method="trf")
        th = sol.x
        r = resid(th)
        rss = float(np.einsum("i,i->", r, r))
        # analytic Jacobian of the model: d model / d th = -1 on the active term
        comp_active = (lF - th[di]) >= (lQ - th[nd + li])
        J = np.zeros((t.size, th.size))
        J[np.arange(t.size)[comp_active], di[comp_active]] = -1.0
        J[np.arange(t.size)[~comp_active], nd + li[~comp_active]] = -1.0
        identified = (J != 0).sum(axis=0) > 0
        dof = t.size - int(identified.sum())
        s2 = rss / dof if dof > 0 else math.inf
        Ji = J[:, identified]
        cov = np.linalg.pinv(Ji.T @ Ji) * s2
        se = np.full(th.size, math.inf)
        se[identified] = np.sqrt(np.maximum(np.diag(cov), 0))
        q = t_quantile(1 - self.alpha / 2, dof)
        est, ci = {}, {}
        for j, name in enumerate(dnames + lnames):
            if identified[j]:
                est[name] = float(math.exp(th[j]))
                ci[name] = (float(math.exp(th[j] - q * se[j])), float(math.exp(th[j] + q * se[j])))
            else:
                est[name] = env_P.get(name, env_B.get(name)) if j < nd else env_B[name]
                ci[name] = (est[name], math.inf)
        compute = {d: est[d] for d in dnames}
        memory = {l: est[l] for l in lnames}
        return RooflineResult("lsq", compute, memory, {d: ci[d] for d in dnames}, {l: ci[l] for l in lnames},
                              int(t.size), self.alpha, meta={"rss": rss, "dof": dof,
                                                             "log_se": dict(zip(dnames + lnames, map(float, se))),
                                                             "unidentified": [n for j, n in enumerate(dnames + lnames) if not identified[j]]})
