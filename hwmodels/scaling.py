"""Throughput vs number of devices: Amdahl, the Universal Scalability Law, and selection.

Models (``N`` devices, ``X(N)`` throughput, ``x1`` the one-device throughput):

* Amdahl (Amdahl, AFIPS 1967; throughput form as in Gunther 2007)::

      X(N) = x1 * N / (1 + s (N - 1))          s = serial fraction in [0, 1]

* USL (Gunther, *Guerrilla Capacity Planning*, Springer 2007, eq. 4.31)::

      X(N) = x1 * N / (1 + sigma (N - 1) + kappa N (N - 1))

  ``sigma`` is contention, ``kappa`` coherency (crosstalk); with ``kappa > 0``
  throughput peaks at ``N* = sqrt((1 - sigma) / kappa)`` (ibid. eq. 4.33).

Fitting is nonlinear least squares on throughput (additive Gaussian errors, as
the R ``usl`` package does), or on log throughput with ``errors="multiplicative"``
(constant relative noise across scales). Parameter intervals are Wald/Student
t (see :mod:`hwmodels.results`); prediction intervals add the residual
variance to the delta-method variance of the mean:
``y_hat +/- t * sqrt(g^T Cov g + s^2)``. ``model="auto"`` picks the model with
the lowest BIC (Schwarz 1978; ``criterion=`` may choose ``aic`` or ``aicc``,
all three are reported in ``candidates``). BIC is the default because scaling
sweeps are short (5-10 points): AICc's small-sample penalty
``2k(k+1)/(n-k-1)`` then dominates and rejects the USL even on data whose
throughput visibly falls (the SPEC SDM91 case in the tests: BIC picks USL,
AICc would pick Amdahl, which cannot decline). Scaling efficiency is ``X(N) / (N * X(1))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import FitResult, as_float_array, check_alpha, jacobian, nls, t_quantile

MODELS = ("amdahl", "usl")
ERRORS = ("additive", "multiplicative")


def amdahl(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    x1, s = p[0], p[1]
    return x1 * n / (1.0 + s * (n - 1.0))


def usl(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    x1, sigma, kappa = p[0], p[1], p[2]
    return x1 * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


_FUNCS = {"amdahl": amdahl, "usl": usl}
_NAMES = {"amdahl": ("x1", "s"), "usl": ("x1", "sigma", "kappa")}


@dataclass(frozen=True, eq=False)
class ScalingResult(FitResult):
    """A fitted Amdahl or USL curve; ``candidates`` holds every model tried (auto)."""

    errors: str = "additive"
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)

    def _f(self, n, p=None):
        return _FUNCS[self.model](np.asarray(n, dtype=float), self.values if p is None else p)

    def predict(self, n: Any, *, alpha: float = 0.05, interval: str = "prediction") -> dict[str, np.ndarray]:
        """Throughput at ``n`` devices with a ``1-alpha`` interval.

        ``interval="prediction"`` (a new measurement) or ``"confidence"`` (the mean curve).
        """
        alpha = check_alpha(alpha)
        if interval not in ("prediction", "confidence"):
            raise choices_error("interval", interval, ("prediction", "confidence"))
        n = np.atleast_1d(np.asarray(n, dtype=float))
        if np.any(n <= 0):
            raise ModelInputError("predict: device counts must be > 0")
        t = t_quantile(1 - alpha / 2, self.dof)
        s2 = self.sigma2 if interval == "prediction" else 0.0
        if self.errors == "multiplicative":
            g = lambda p: np.log(np.maximum(self._f(n, p), 1e-300))  # noqa: E731
        else:
            g = lambda p: self._f(n, p)  # noqa: E731
        J = jacobian(g, self.values)
        var = np.einsum("ij,jk,ik->i", J, self.cov, J) + s2
        mid = g(self.values)
        half = t * np.sqrt(np.maximum(var, 0))
        lo, hi = mid - half, mid + half
        if self.errors == "multiplicative":
            mid, lo, hi = np.exp(mid), np.exp(lo), np.exp(hi)
        return {"x": n, "y": mid, "lo": lo, "hi": hi}

    def efficiency(self, n: Any) -> np.ndarray:
        """Scaling efficiency ``X(N) / (N X(1))`` of the fitted curve."""
        n = np.atleast_1d(np.asarray(n, dtype=float))
        return self._f(n) / (n * self._f(np.array([1.0])))

    def peak_devices(self) -> float:
        """USL ``N* = sqrt((1 - sigma)/kappa)``; inf for Amdahl or kappa = 0."""
        if self.model != "usl":
            return math.inf
        sigma, kappa = self.values[1], self.values[2]
        return math.sqrt(max(1 - sigma, 0) / kappa) if kappa > 0 else math.inf

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        d = super().to_dict(alpha)
        d.update(errors=self.errors, candidates=self.candidates, peak_devices=self.peak_devices())
        return d


def efficiency(devices: Any, throughput: Any) -> np.ndarray:
    """Measured scaling efficiency vs the smallest measured scale: ``(X/N) / (X0/N0)``."""
    n = as_float_array(devices, "devices")
    x = as_float_array(throughput, "throughput")
    i = int(np.argmin(n))
    return (x / n) / (x[i] / n[i])


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """``Scaling(model="auto"|"amdahl"|"usl", errors="additive"|"multiplicative").fit(n, x)``."""

    model: str = "auto"
    errors: str = "additive"
    criterion: str = "bic"

    def __post_init__(self) -> None:
        if self.model not in MODELS + ("auto",):
            raise choices_error("scaling.model", self.model, MODELS + ("auto",))
        if self.errors not in ERRORS:
            raise choices_error("scaling.errors", self.errors, ERRORS)
        if self.criterion not in ("aicc", "aic", "bic"):
            raise choices_error("scaling.criterion", self.criterion, ("aic", "aicc", "bic"))

    def fit(self, devices: Any, throughput: Any = None) -> ScalingResult:
        """Fit ``throughput`` vs ``devices`` (arrays, or a DataFrame with those two columns)."""
        if throughput is None and hasattr(devices, "columns"):
            df = devices
            for c in ("devices", "throughput"):
                if c not in df.columns:
                    raise ModelInputError(f"scaling data: no column {c!r}; columns present: {', '.join(map(str, df.columns))}")
            devices, throughput = df["devices"], df["throughput"]
        n = as_float_array(devices, "devices")
        x = as_float_array(throughput, "throughput")
        if n.size != x.size:
            raise ModelInputError(f"scaling data: {n.size} device counts but {x.size} throughputs")
        if np.any(n <= 0) or np.any(x <= 0):
            raise ModelInputError("scaling data: device counts and throughputs must be > 0")
        models = MODELS if self.model == "auto" else (self.model,)
        fits = {}
        for m in models:
            need = len(_NAMES[m]) + 1
            if np.unique(n).size < len(_NAMES[m]) or n.size < need:
                if self.model != "auto":
                    raise ModelInputError(f"scaling.model={m}: needs at least {need} points at "
                                          f"{len(_NAMES[m])} distinct device counts, got {n.size}")
                continue
            fits[m] = self._fit_one(m, n, x)
        if not fits:
            raise ModelInputError(f"scaling data: too few points ({n.size}) to fit any model")
        cands = {m: {"aic": r.aic, "aicc": r.aicc, "bic": r.bic, "rss": r.rss} for m, r in fits.items()}
        best = min(fits, key=lambda m: (getattr(fits[m], self.criterion), len(_NAMES[m])))
        r = fits[best]
        return ScalingResult(model=r.model, names=r.names, values=r.values, cov=r.cov, n=r.n, dof=r.dof, rss=r.rss,
                             meta={"criterion": self.criterion, "selected_by": self.criterion if len(fits) > 1 else "user"},
                             errors=self.errors, candidates=cands)

    def _fit_one(self, m: str, n: np.ndarray, x: np.ndarray) -> ScalingResult:
        f = _FUNCS[m]
        i1 = np.argmin(n)
        x1_0 = x[i1] / n[i1]
        # start contention from the largest-scale efficiency: eff = 1/(1+s(N-1))
        j = np.argmax(n)
        eff = min(max((x[j] / n[j]) / x1_0, 1e-3), 1.0)
        s0 = (1 / eff - 1) / max(n[j] - 1, 1) if n[j] > 1 else 0.01
        s0 = float(np.clip(s0, 1e-4, 0.9))
        if m == "amdahl":
            p0, bounds = [x1_0, s0], ([0, 0], [np.inf, 1])
        else:
            p0, bounds = [x1_0, s0 / 2, s0 / (10 * max(n.max(), 2))], ([0, 0, 0], [np.inf, 1, np.inf])
        if self.errors == "multiplicative":
            fun = lambda nn, p: np.log(np.maximum(f(nn, p), 1e-300))  # noqa: E731
            yy = np.log(x)
        else:
            fun, yy = f, x
        # exact grouping by device count (few distinct N, many repeats): see hwmodels.results.nls
        ug, inv, cnt = np.unique(n, return_inverse=True, return_counts=True)
        if ug.size < n.size:
            ybar = np.bincount(inv, weights=yy) / cnt
            within = float(np.sum((yy - ybar[inv]) ** 2))
            xg, yg, wg = ug, ybar, cnt.astype(float)
        else:
            xg, yg, wg, within = n, yy, None, 0.0
        best = None
        for scale in (1.0, 0.1, 10.0):
            q0 = list(p0)
            q0[1:] = [v * scale for v in q0[1:]]
            try:
                p, cov, rss, dof = nls(fun, xg, yg, q0, bounds=bounds, weights=wg, rss_within=within,
                                       n_obs=int(n.size))
            except (ValueError, np.linalg.LinAlgError):
                continue
            if best is None or rss < best[2]:
                best = (p, cov, rss, dof)
        if best is None:
            raise ModelInputError(f"scaling.model={m}: the fit did not converge")
        p, cov, rss, dof = best
        return ScalingResult(model=m, names=_NAMES[m], values=p, cov=cov, n=int(n.size), dof=int(dof), rss=rss,
                             errors=self.errors)
