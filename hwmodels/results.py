"""The shared immutable fit result and the least-squares machinery behind it.

Every model here fits like statsmodels: ``Model(spec).fit(data) -> Result``.
A result is a frozen dataclass holding point estimates, their covariance and
the residual degrees of freedom; ``conf_int(alpha)`` gives Wald intervals
``theta_i +/- t_{1-alpha/2, dof} * se_i`` (Student t, as statsmodels'
``RegressionResults.conf_int`` and R's ``confint.default`` with t quantiles),
with the covariance ``s^2 (J^T J)^-1`` of nonlinear least squares (Bates & Watts,
*Nonlinear Regression Analysis and Its Applications*, 1988, ch. 2).

The inverse is taken on the column-scaled Jacobian (:func:`cov_from_jacobian`):
``J = Js D`` with ``D = diag(||J_j||)``, ``(J^T J)^-1 = D^-1 (Js^T Js)^-1 D^-1``
through the SVD of ``Js``. Parameters on scales 1e2 (a throughput) and 1e-4 (a
coherency) otherwise give ``J^T J`` a condition number near 1e18, and a
pseudo-inverse with the default cutoff silently drops the small direction and
understates the standard errors (Golub & Van Loan, *Matrix Computations*,
4th ed., sec. 5.3.7 on column scaling). A direction that stays singular after
scaling (relative singular value < 1e-10) is not identified: every parameter
loading on it gets an infinite variance rather than a falsely small one.

Information criteria for a Gaussian likelihood with the variance profiled out
(Burnham & Anderson, *Model Selection and Multimodel Inference*, 2002, eq. 2.13
and 2.14), with ``k`` counting the fitted parameters plus the variance:

* ``AIC  = n ln(RSS/n) + 2k``
* ``AICc = AIC + 2k(k+1)/(n-k-1)`` (small-sample correction; convergence selects families by AICc, scaling by BIC)
* ``BIC  = n ln(RSS/n) + k ln n``
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError


def single_thread_blas():
    """Context limiting BLAS to one thread during a fit.

    The fits here are dominated by long 1-D dot products and tall-skinny
    products; on a loaded machine a multithreaded OpenBLAS spin-waits and a
    100k-element dot took 20 ms instead of 0.1 ms (measured on the dev VM at
    load 5 on 2 cores). One thread is never slower for these shapes.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - optional
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def dot(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.einsum("i,i->", a, b))


def t_quantile(q: float, dof: float) -> float:
    """Student t quantile (the normal one for infinite or non-positive ``dof``): ``scipy.special``'s inverse CDFs,
    the functions ``scipy.stats`` evaluates, without importing ``scipy.stats`` (about 0.6 s, every CLI call)."""
    from scipy import special

    if not math.isfinite(dof) or dof <= 0:
        return float(special.ndtri(q))
    return float(special.stdtrit(dof, q))


def check_alpha(alpha: float, field_name: str = "alpha") -> float:
    a = float(alpha)
    if not 0.0 < a < 1.0:
        raise ModelInputError(f"{field_name} must be in (0, 1), got {alpha!r}")
    return a


@dataclass(frozen=True, eq=False)
class FitResult:
    """Point estimates, covariance and fit statistics of one fitted model."""

    model: str
    names: tuple[str, ...]
    values: np.ndarray
    cov: np.ndarray
    n: int
    dof: int
    rss: float
    meta: dict[str, Any] = field(default_factory=dict)

    # -- parameters ---------------------------------------------------------------
    @property
    def params(self) -> dict[str, float]:
        return {k: float(v) for k, v in zip(self.names, self.values)}

    @property
    def bse(self) -> dict[str, float]:
        d = np.diag(self.cov) if self.cov.size else np.array([])
        return {k: float(math.sqrt(v)) if v >= 0 and math.isfinite(v) else math.inf for k, v in zip(self.names, d)}

    @property
    def sigma2(self) -> float:
        return self.rss / self.dof if self.dof > 0 else math.nan

    def conf_int(self, alpha: float = 0.05) -> dict[str, tuple[float, float]]:
        """Two-sided ``1-alpha`` Wald intervals (Student t with ``dof``)."""
        alpha = check_alpha(alpha)
        t = t_quantile(1 - alpha / 2, self.dof)
        out = {}
        for k, v in self.params.items():
            se = self.bse[k]
            out[k] = (v - t * se, v + t * se)
        return out

    # -- information criteria -----------------------------------------------------
    @property
    def k(self) -> int:
        return len(self.names) + 1  # + residual variance

    @property
    def loglik_term(self) -> float:
        return self.n * math.log(max(self.rss, 1e-300) / self.n)

    @property
    def aic(self) -> float:
        return self.loglik_term + 2 * self.k

    @property
    def aicc(self) -> float:
        d = self.n - self.k - 1
        return self.aic + (2 * self.k * (self.k + 1) / d if d > 0 else math.inf)

    @property
    def bic(self) -> float:
        return self.loglik_term + self.k * math.log(self.n)

    # -- presentation ---------------------------------------------------------------
    def summary(self, alpha: float = 0.05) -> str:
        ci = self.conf_int(alpha)
        lines = [f"{self.model}: n={self.n} dof={self.dof} AICc={self.aicc:.4g} BIC={self.bic:.4g}"]
        lines.append(f"{'param':>14} {'estimate':>14} {'std err':>12} {f'[{alpha / 2:.3g}':>12} {f'{1 - alpha / 2:.3g}]':>12}")
        for k, v in self.params.items():
            lo, hi = ci[k]
            lines.append(f"{k:>14} {v:>14.6g} {self.bse[k]:>12.4g} {lo:>12.6g} {hi:>12.6g}")
        for k, v in self.meta.items():
            if isinstance(v, str | int | float | bool):
                lines.append(f"{k}: {v}")
        return "\n".join(lines)

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        return {
            "model": self.model,
            "params": self.params,
            "std_err": self.bse,
            "conf_int": {k: list(v) for k, v in self.conf_int(alpha).items()},
            "alpha": alpha,
            "n": self.n,
            "dof": self.dof,
            "rss": self.rss,
            "aic": self.aic,
            "aicc": self.aicc,
            "bic": self.bic,
            **{k: v for k, v in self.meta.items() if isinstance(v, str | int | float | bool | list | dict | None)},
        }

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        return f"<{type(self).__name__} {self.model}: {ps}>"


# ---------------------------------------------------------------------------------
def nls(
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    p0: Sequence[float],
    *,
    bounds: tuple[Sequence[float], Sequence[float]] | None = None,
    x_scale: Sequence[float] | str = "jac",
    weights: np.ndarray | None = None,
    rss_within: float = 0.0,
    n_obs: int | None = None,
) -> tuple[np.ndarray, np.ndarray, float, int]:
    """Nonlinear least squares ``min sum w (y - f(x, p))^2``; returns (p, cov, rss, dof).

    ``cov = s^2 (J^T W J)^+`` at the optimum with ``s^2 = RSS/(n-p)``. Grouped
    data (``y`` = group means, ``weights`` = group sizes, ``rss_within`` = the
    within-group sum of squares, ``n_obs`` = raw row count) give exactly the
    estimates, RSS and covariance of the ungrouped fit, since
    ``sum_i (y_i - f)^2 = sum_g [n_g (ybar_g - f)^2] + within-group SS``.
    """
    sw = None if weights is None else np.sqrt(np.asarray(weights, dtype=float))
    from scipy.optimize import least_squares

    p0 = np.asarray(p0, dtype=float)
    lb, ub = (np.full(p0.size, -np.inf), np.full(p0.size, np.inf)) if bounds is None else map(np.asarray, bounds)
    lb, ub = np.asarray(lb, dtype=float), np.asarray(ub, dtype=float)
    eps_l = np.where(np.isfinite(lb), 1e-9 * (np.abs(lb) + 1), 0.0)
    eps_u = np.where(np.isfinite(ub), 1e-9 * (np.abs(ub) + 1), 0.0)
    p0 = np.clip(p0, lb + eps_l, ub - eps_u)

    def resid_finite(p):
        r = y - f(x, p)
        if sw is not None:
            r = r * sw
        return r

    def resid(p):
        r = resid_finite(p)
        return np.where(np.isfinite(r), r, 1e150)

    with single_thread_blas():
        sol = least_squares(resid, p0, bounds=(lb, ub), x_scale=x_scale, method="trf", max_nfev=2000)
    p = sol.x
    r = resid(p)
    rss = dot(r, r) + float(rss_within)
    n, k = (y.size if n_obs is None else int(n_obs)), p.size
    dof = n - k
    J = jacobian(lambda q: -resid_finite(q), p, lb, ub)
    s2 = rss / dof if dof > 0 else math.inf
    return p, cov_from_jacobian(J, s2), rss, dof


def cov_from_jacobian(J: np.ndarray, s2: float, *, rcond: float = 1e-10) -> np.ndarray:
    """``s2 (J^T J)^-1`` computed on the column-scaled Jacobian; inf variance along unidentified directions."""
    J = np.asarray(J, dtype=float)
    k = J.shape[1]
    if not np.all(np.isfinite(J)):
        return np.full((k, k), np.inf)
    d = np.sqrt(np.einsum("ij,ij->j", J, J))
    dead = ~(d > 0)
    d = np.where(dead, 1.0, d)
    Js = J / d
    try:
        _, sv, vt = np.linalg.svd(Js, full_matrices=False)  # k <= 5 columns: no BLAS threading to limit
    except np.linalg.LinAlgError:
        return np.full((k, k), np.inf)
    keep = sv > rcond * (sv[0] if sv.size else 0.0)
    inv_s = np.where(keep, 1.0 / np.where(keep, sv, 1.0) ** 2, 0.0)
    cov_s = (vt.T * inv_s) @ vt
    with np.errstate(over="ignore", invalid="ignore"):
        cov = cov_s / np.outer(d, d) * s2
    if not np.all(keep) or np.any(dead):
        # a null direction of the scaled problem: parameters loading on it are not identified
        null = np.abs(vt[~keep]).max(axis=0) > 1e-6 if np.any(~keep) else np.zeros(k, bool)
        bad = null | dead
        cov[bad, :] = np.inf
        cov[:, bad] = np.inf
    return cov


def jacobian(g: Callable[[np.ndarray], np.ndarray], p: np.ndarray, lb: Any = None, ub: Any = None) -> np.ndarray:
    """Central finite-difference Jacobian of ``g`` at ``p`` (rows: outputs).

    Step ``h_i = 1e-6 max(|p_i|, 1e-8)``; a parameter sitting on a bound (``lb``/``ub``) gets a one-sided
    difference into the feasible side, so that e.g. a coherency fitted as exactly 0 keeps a finite derivative.
    """
    p = np.asarray(p, dtype=float)
    lb = np.full(p.size, -np.inf) if lb is None else np.asarray(lb, dtype=float)
    ub = np.full(p.size, np.inf) if ub is None else np.asarray(ub, dtype=float)
    g0 = np.atleast_1d(g(p))
    J = np.empty((g0.size, p.size))
    for i in range(p.size):
        h = 1e-6 * max(abs(p[i]), 1e-8)
        if p[i] - h < lb[i]:  # forward difference at a lower bound
            h = 1e-6 * max(abs(p[i]), abs(ub[i] - lb[i]) * 1e-3 if np.isfinite(ub[i] - lb[i]) else 1e-6, 1e-8)
            pp = p.copy()
            pp[i] += h
            J[:, i] = (np.atleast_1d(g(pp)) - g0) / h
            continue
        if p[i] + h > ub[i]:  # backward difference at an upper bound
            pm = p.copy()
            pm[i] -= h
            J[:, i] = (g0 - np.atleast_1d(g(pm))) / h
            continue
        pp, pm = p.copy(), p.copy()
        pp[i] += h
        pm[i] -= h
        J[:, i] = (np.atleast_1d(g(pp)) - np.atleast_1d(g(pm))) / (2 * h)
    return J


def as_float_array(values: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ModelInputError(f"{name}: expected numbers") from None
    if arr.size == 0:
        raise ModelInputError(f"{name}: no values")
    if not np.all(np.isfinite(arr)):
        bad = int(np.argmax(~np.isfinite(arr)))
        raise ModelInputError(f"{name}: non-finite value at position {bad}")
    return arr
