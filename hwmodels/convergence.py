"""Eval-loss curves: fit several families, average them, and predict x (steps/tokens/samples) to a target.

Families (``x`` > 0 is steps, tokens or samples counted from the start of the
curve; ``L`` the eval loss):

* ``power``: ``L = a x^-b + c`` -- power law with an irreducible floor ``c``
  (Kaplan et al. 2020, arXiv:2001.08361, eq. 1.2-1.3; Hoffmann et al. 2022
  "Chinchilla", eq. 2 at fixed model size: ``L(D) = (E + A/N^alpha) + B/D^beta``).
* ``power0``: ``L = a x^-b`` -- Kaplan's pure power law (no floor).
* ``power_shift``: ``L = a (x + x0)^-b + c`` -- the same law for a curve that
  starts from a checkpoint (warm start, fine-tuning, a resumed run, MLPerf's
  GPT-3 benchmark): ``x0`` is the work already done before the curve's
  origin, fitted (the "effective data transferred" of Hernandez et al. 2021,
  arXiv:2102.01293, sec. 2).
* ``exp``: ``L = a exp(-x/tau) + c`` -- decay to a floor (the linear-
  convergence regime of gradient descent on strongly convex losses).
* ``exp2``: ``L = a1 exp(-x/tau1) + a2 exp(-x/tau2) + c`` with ``tau1 < tau2``
  -- a fast transient (re-warm-up after a checkpoint, a data or learning-rate
  switch) on top of a slow decay.
* ``exp_drift``: ``L = a exp(-x/tau) + c - d x`` -- a transient plus a local
  linear drift: what a power law at large ``x0`` looks like over a short
  window. It has no floor, so it is only trusted for short extrapolations
  (the averaging below and the calibrated ``reliable`` flag see to that).

**Fitting.** Every family is linear in its amplitudes and floor, so each is
fitted by variable projection (Golub & Pereyra, SIAM J. Numer. Anal. 10,
1973): for fixed nonlinear parameters (``b``, ``tau``, ``x0``; one or two)
the rest is a linear least-squares solve; the profile RSS is minimized over
the nonlinear ones on a log grid, then refined (bounded Brent in 1-D,
Nelder-Mead in 2-D). No starting values. The covariance is
``s^2 (J^T J)^-1`` on the column-scaled Jacobian at the optimum
(:func:`hwmodels.results.cov_from_jacobian`).

**Autocorrelated residuals.** Eval losses are smooth: consecutive residuals
are correlated, and the iid formula understates the variance. Each family's
covariance is multiplied by the AR(1) variance-inflation factor
``c = (1 + rho) / (1 - rho)`` of its lag-1 residual autocorrelation ``rho``
(clipped to [0, 0.9]) (the large-sample factor for the mean of an AR(1)
series; Box, Jenkins & Reinsel, *Time Series Analysis*, 4th ed., sec. 2.1.5).

**Across families.** ``family="auto"`` fits all families the data support
(``n >= k + 3`` points). ``select="average"`` (the default) weights them by
how well each *extrapolates this curve*: leave-future-out (LFO; Buerkner,
Gabry & Vehtari 2020): each family is refitted on the first 60% and 75% of the
points and asked for the x at which it reaches the median of the last 3
losses; its log error there, ``e_f``, gives the weight
``w_f ~ exp(-sum e_f^2 / (2 min_g mse_g))`` (a stacking-like rule, Yao et al.
2018, "Using stacking to average Bayesian predictive distributions", on the
quantity that matters, out of sample) and its structural error
``sd_f = K * rmse_f * ln(x*_f/x_max) / mean ln(x_end/x_cut)``: the LFO error
per unit of log extrapolation, scaled to the extrapolation asked for. Curves
with fewer than 8 points fall back to quasi-likelihood Akaike weights (QAICc,
Burnham & Anderson, *Model Selection and Multimodel Inference*, 2002, sec. 2.5:
``QAICc = n ln(RSS/n)/c + 2K + 2K(K+1)/(n-K-1)`` with ``c`` the inflation
factor of the best-fitting family) and no structural term. ``x*`` is drawn
from every family in proportion to its weight (parameter draws from
``N(theta_hat, COV_INFLATION c Cov)``, log-normal on positive scales, evaluated
through the nonlinear ``x*``, times ``exp(N(0, sd_f^2))``), and the pooled
median and percentile interval are reported, so the interval widens when the
families disagree about where the curve goes and when the curve's own future
has been hard to predict. ``K`` (``STRUCT_INFLATION``) and ``COV_INFLATION``
were calibrated once on simulated curves (``benchmarks/fit_coverage.py
--calibrate``, seeds 0-199) and checked on other seeds (``benchmarks/README.md``).
``select="aicc"`` keeps the old behaviour: the single lowest-AICc family with
its parameter interval only.

**x to target** ``T``: closed forms for ``power`` (``(a/(T-c))^(1/b)``),
``power_shift`` (the same minus ``x0``), ``power0``, ``exp``
(``-tau ln((T-c)/a)``), bisection in ``log x`` for ``exp2`` and ``exp_drift``.
Unreachable (``inf``) when the curve stays above ``T`` (at or below the
floor). The result says ``reachable`` and ``reliable``. ``reliable`` is
calibrated: the simulation in ``benchmarks/fit_coverage.py`` measures the
coverage of the nominal-90% interval per extrapolation regime
(``x*/x_max``, table ``REGIME_COVERAGE``), and a result is reliable only in a
regime whose simulated coverage is at least ``level - 0.05``, when its upper
bound is finite, when the fitted curve is a decaying one, and when the curve
has at least ``MIN_CALIBRATED_POINTS`` (8) points, the smallest prefix the
calibration saw; ``message`` says
which condition failed, plainly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import FitResult, as_float_array, check_alpha, cov_from_jacobian, jacobian, single_thread_blas

FAMILIES = ("power", "exp", "power0", "power_shift", "exp2", "exp_drift")

# Leave-future-out cuts (fractions of the curve a family is refitted on) and the floor of its log-x error scale.
LFO_CUTS = (0.6, 0.75)
LFO_FLOOR = 0.02
# Multipliers of the parameter covariance (COV_INFLATION) and of the leave-future-out structural sd
# (STRUCT_INFLATION), calibrated by `benchmarks/fit_coverage.py --calibrate` on seeds 0..199 (200 simulated curves):
# coverage of the nominal 90% interval 0.815 / 0.860 / 0.900 at STRUCT_INFLATION 2 / 3 / 5; the covariance
# multiplier moves it by < 0.02 between 0.1 and 1, so it stays 1. Checked on seeds 100000..100199: 0.910.
COV_INFLATION = 1.0
STRUCT_INFLATION = 5.0
# The simulated prefixes had 8-32 points; with fewer the leave-future-out check cannot run and no result is reliable.
MIN_CALIBRATED_POINTS = 8
# Simulated coverage of the nominal 90% interval by estimated extrapolation ratio x*/x_max (upper bin edges),
# from the same calibration run (benchmarks/README.md, "Fit coverage"); reliable needs >= level - 0.05.
REGIME_EDGES = (1.25, 2.0, 4.0, 10.0, math.inf)
REGIME_COVERAGE = (0.95, 0.98, 0.94, 0.87, 0.77)


# ----------------------------------------------------------------------------- curve functions
def f_power(x, p):
    return p[0] * np.power(x, -p[1]) + p[2]


def f_exp(x, p):
    return p[0] * np.exp(-x / p[1]) + p[2]


def f_power0(x, p):
    return p[0] * np.power(x, -p[1])


def f_power_shift(x, p):
    return p[0] * np.power(x + p[3], -p[1]) + p[2]


def f_exp2(x, p):
    return p[0] * np.exp(-x / p[1]) + p[2] * np.exp(-x / p[3]) + p[4]


def f_exp_drift(x, p):
    return p[0] * np.exp(-x / p[1]) + p[2] - p[3] * x


_F: dict[str, Callable] = {"power": f_power, "exp": f_exp, "power0": f_power0, "power_shift": f_power_shift,
                           "exp2": f_exp2, "exp_drift": f_exp_drift}
_NAMES = {"power": ("a", "b", "c"), "exp": ("a", "tau", "c"), "power0": ("a", "b"),
          "power_shift": ("a", "b", "c", "x0"), "exp2": ("a1", "tau1", "a2", "tau2", "c"),
          "exp_drift": ("a", "tau", "c", "d")}
_POSITIVE = {"a", "a1", "a2", "b", "tau", "tau1", "tau2", "x0"}  # drawn log-normal when fitted > 0
_FLOOR = {"power": 2, "exp": 2, "power_shift": 2, "exp2": 4}  # index of the floor parameter


def _rows(P: np.ndarray, f: str) -> list[np.ndarray]:
    return [P[:, i] for i in range(len(_NAMES[f]))]


def _bisect(fam: str, P: np.ndarray, target: float, x_hi: float) -> np.ndarray:
    """First x in (0, x_hi] with f(x) <= target on each row; inf if none.

    A log grid (``x_hi 1e-12 .. x_hi``, 10 points per decade) finds the first grid point at or below the target
    -- a curve may dip and rise again (``exp_drift`` with a negative drift) -- then bisection in ``log x``
    between it and the grid point before.
    """
    f = _F[fam]
    m = P.shape[0]
    g = np.linspace(math.log(x_hi) - 12 * math.log(10), math.log(x_hi), 121)
    with np.errstate(all="ignore"):
        F = np.stack([f(np.exp(t), P.T) for t in g], axis=1)  # (m, grid)
        below = F <= target
        found = below.any(axis=1)
        j = np.argmax(below, axis=1)
        hi = g[j]
        lo = np.where(j > 0, g[np.maximum(j - 1, 0)], g[0] - 30.0)
        for _ in range(45):
            mid = (lo + hi) / 2
            above = f(np.exp(mid), P.T) > target
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
    x = np.where(j == 0, 0.0, np.exp(hi))  # already below the target at the smallest x
    return np.where(found, x, np.inf) if m else np.empty(0)


def x_to_target(family: str, p: np.ndarray, target: float, x_hi: float | None = None) -> np.ndarray:
    """``x*`` for parameter rows ``p`` (shape (k,) or (m, k)); inf where unreachable (or beyond ``x_hi``)."""
    P = np.atleast_2d(np.asarray(p, dtype=float))
    with np.errstate(all="ignore"):
        if family in ("power", "power_shift"):
            a, b, c = P[:, 0], P[:, 1], P[:, 2]
            gap = target - c
            x = np.where((gap > 0) & (a > 0) & (b > 0), np.power(a / gap, 1 / b), np.inf)
            if family == "power_shift":
                x = np.maximum(x - P[:, 3], 0.0)
        elif family == "exp":
            a, tau, c = P[:, 0], P[:, 1], P[:, 2]
            gap = target - c
            x = np.where((gap > 0) & (a > 0) & (tau > 0), -tau * np.log(np.minimum(gap / a, 1.0)), np.inf)
        elif family == "power0":
            a, b = P[:, 0], P[:, 1]
            x = np.where((target > 0) & (a > 0) & (b > 0), np.power(a / target, 1 / b), np.inf)
        else:
            scale = float(np.nanmax(np.abs(P[:, 1]))) if P.size else 1.0
            x = _bisect(family, P, target, x_hi if x_hi is not None else 1e6 * max(scale, 1.0))
    x = np.where(np.isnan(x), np.inf, x)
    if x_hi is not None:
        x = np.where(x > x_hi, np.inf, x)
    return x if np.ndim(p) > 1 else x[:1]


def _regime_coverage(ratio: float) -> float:
    for edge, cov in zip(REGIME_EDGES, REGIME_COVERAGE):
        if ratio <= edge:
            return cov
    return 0.0


@dataclass(frozen=True, eq=False)
class ConvergenceResult(FitResult):
    """The best-weighted family's fit (``params``, ``cov``, ``predict``); ``others`` holds the rest."""

    family: str = "power"
    x_max: float = 1.0
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)
    others: dict[str, FitResult] = field(default_factory=dict)
    select: str = "average"
    x_data: np.ndarray | None = None
    y_data: np.ndarray | None = None

    def predict(self, x: Any) -> np.ndarray:
        return _F[self.family](np.atleast_1d(np.asarray(x, dtype=float)), self.values)

    @property
    def asymptote(self) -> float:
        i = _FLOOR.get(self.family)
        return float(self.values[i]) if i is not None else (-math.inf if self.family == "exp_drift" else 0.0)

    def fits(self) -> dict[str, FitResult]:
        """Every fitted family's result (the best one first)."""
        return {self.family: self, **self.others}

    def _draws(self, fam: str, res: FitResult, m: int, rng) -> np.ndarray:
        """Parameter draws: normal on the floor and drift, log-normal on the positive scales (amplitudes,
        exponents, time constants, offsets), with the delta-method covariance ``Cov_ij / (p_i p_j)`` --
        a positive rate drawn negative would turn a decaying curve into a rising one."""
        c = float(res.meta.get("c_hat", 1.0)) * COV_INFLATION
        cov = np.nan_to_num(res.cov, nan=0.0, posinf=0.0, neginf=0.0) * c
        v = np.asarray(res.values, dtype=float)
        pos = np.array([nm in _POSITIVE and val > 0 for nm, val in zip(res.names, v)])
        scale = np.where(pos, v, 1.0)
        mean = np.where(pos, np.log(np.where(pos, v, 1.0)), v)
        with np.errstate(over="ignore", invalid="ignore"):
            cov_q = np.nan_to_num(cov / np.outer(scale, scale), nan=0.0, posinf=0.0, neginf=0.0)
        try:
            q = rng.multivariate_normal(mean, cov_q, size=m, method="svd", check_valid="ignore")
        except (ValueError, np.linalg.LinAlgError):
            return np.repeat(v[None, :], m, axis=0)
        with np.errstate(over="ignore"):
            P = np.where(pos, np.exp(np.minimum(q, 700.0)), q)
        return self._in_region(fam, res, P, c, rng)

    def _in_region(self, fam: str, res: FitResult, P: np.ndarray, c: float, rng) -> np.ndarray:
        """Keep the draws inside the likelihood confidence region of the fit (Bates & Watts 1988, sec. 6.1.1:
        ``S(theta) <= S_hat (1 + c p/(n-p) F_{p,n-p}(0.99))``, ``c`` the autocorrelation inflation), resampled
        back to the same count (the estimate itself always counts as inside). A Wald normal on a nearly degenerate
        fit (two time constants almost equal) otherwise proposes curves the data plainly rule out."""
        if self.x_data is None or res.dof <= 0 or not math.isfinite(res.rss):
            return P
        from scipy import stats

        f = _F[fam]
        with np.errstate(all="ignore"):
            R = self.y_data[None, :] - np.stack([f(xv, P.T) for xv in self.x_data], axis=1)
            S = np.einsum("ij,ij->i", R, R)
        k = len(res.names)
        bound = res.rss * (1 + c * k / res.dof * float(stats.f.ppf(0.99, k, res.dof)))
        ok = np.isfinite(S) & (S <= bound)
        keep = np.vstack([P[ok], np.asarray(res.values, dtype=float)[None, :]])  # the estimate is always inside
        return keep[rng.integers(0, keep.shape[0], size=P.shape[0])]

    def x_to_target(self, target: float, *, level: float = 0.9, n_draws: int = 4000, seed: int = 0,
                    max_ratio: float = 10.0, max_extrapolation: float = 10.0) -> dict[str, Any]:
        """Point estimate and ``level`` interval of the x at which the loss reaches ``target``.

        ``max_ratio`` (``hi/lo``) and ``max_extrapolation`` (``x*/x_max``) add plain-words problems on top of the
        calibrated regime check.
        """
        level = 1 - check_alpha(1 - level, "level")
        rng = np.random.default_rng(seed)
        fams = self.fits() if self.select == "average" else {self.family: self}
        weights = {f: self.candidates.get(f, {}).get("weight", 0.0) for f in fams}
        if self.select != "average" or sum(weights.values()) <= 0:
            weights = {self.family: 1.0}
        tot = sum(weights.values())
        x_hi = 1e4 * self.x_max
        # exactly n_draws draws in all (callers pair them with other draws): largest-remainder apportionment
        share = {f: n_draws * weights[f] / tot for f in weights}
        counts = {f: int(math.floor(v)) for f, v in share.items()}
        for f in sorted(share, key=lambda f: share[f] - counts[f], reverse=True)[:n_draws - sum(counts.values())]:
            counts[f] += 1
        draws, points = [], {}
        for fam, res in fams.items():
            if fam not in weights:
                continue
            points[fam] = float(x_to_target(fam, res.values, target, x_hi)[0])
            m = counts[fam]
            if m > 0:
                xd = x_to_target(fam, self._draws(fam, res, m, rng), target, x_hi)
                # structural error measured by leave-future-out on this curve, scaled to this extrapolation
                c = self.candidates.get(fam, {})
                rmse, lr = c.get("lfo_rmse_log_x"), c.get("lfo_log_ratio")
                if rmse and lr and math.isfinite(points[fam]) and points[fam] > self.x_max:
                    sd = STRUCT_INFLATION * rmse * math.log(points[fam] / self.x_max) / lr
                    xd = xd * np.exp(rng.normal(0.0, sd, xd.size))
                draws.append(np.where(xd > x_hi, np.inf, xd))
        d = np.sort(np.concatenate(draws)) if draws else np.array([points[self.family]])
        lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
        lo = float(d[min(int(math.floor(lo_q * (d.size - 1))), d.size - 1)])
        hi = float(d[min(int(math.ceil(hi_q * (d.size - 1))), d.size - 1)])
        p_unreach = float(np.mean(~np.isfinite(d)))
        if self.select == "average":
            x_hat = float(np.median(d))
        else:
            x_hat = points[self.family]
        reachable = math.isfinite(x_hat)
        problems = []
        if self.meta.get("theta_at_grid_edge") and self.select != "average":
            problems.append(f"the {self.family} fit's {self.names[1]} sits at the edge of the searched range; "
                            "the data do not look like a decaying loss curve")
        if self.select == "average" and self.n < MIN_CALIBRATED_POINTS:
            problems.append(f"few points: {self.n} < {MIN_CALIBRATED_POINTS}, below the range the interval was "
                            "calibrated on (no leave-future-out check of the families was possible)")
        if self.meta.get("not_decaying"):
            problems.append("the fitted curve does not decay over the observed range")
        ratio = x_hat / self.x_max if reachable else math.inf
        cov_regime = _regime_coverage(ratio)
        if not reachable:
            problems.append(f"unreachable: target {target:g} is at or below the fitted asymptote "
                            f"{self.asymptote:.4g} of the {self.family} fit"
                            + (" (and most of the family-weighted draws)" if self.select == "average" else ""))
        else:
            if not math.isfinite(hi):
                problems.append(f"interval too wide: the upper bound is unbounded ({p_unreach:.0%} of parameter "
                                f"draws put the asymptote above the target)")
            elif lo > 0 and hi / lo > max_ratio:
                problems.append(f"interval too wide: hi/lo = {hi / lo:.3g} > {max_ratio:g}")
            if ratio > max_extrapolation:
                problems.append(f"extrapolation: x* = {x_hat:.4g} is {ratio:.3g}x the largest observed "
                                f"x ({self.x_max:.4g}); more than {max_extrapolation:g}x is not supported by the data")
            elif cov_regime < level - 0.05:
                problems.append(f"extrapolation: at x*/x_max = {ratio:.3g} the {level:.0%} interval covered the truth "
                                f"in only {cov_regime:.0%} of simulated curves (benchmarks/fit_coverage.py)")
        return {"target": float(target), "x_to_target": x_hat, "lo": lo, "hi": hi, "level": level,
                "reachable": reachable, "reliable": reachable and not problems, "p_unreachable": p_unreach,
                "message": "; ".join(problems) if problems else "ok", "model": self.family,
                "select": self.select, "extrapolation": ratio, "regime_coverage": cov_regime,
                "families": {f: {"weight": weights.get(f, 0.0) / tot, "x_to_target": points[f]} for f in points},
                "draws": d}

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        d = super().to_dict(alpha)
        d.update(family=self.family, asymptote=self.asymptote, candidates=self.candidates, select=self.select,
                 x_max=self.x_max)
        return d


# ----------------------------------------------------------------------------- fitting
@dataclass(frozen=True, kw_only=True)
class Convergence:
    """``Convergence(family="auto"|<family>, select="average"|"aicc").fit(x, loss)``."""

    family: str = "auto"
    select: str = "average"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES + ("auto",):
            raise choices_error("convergence.family", self.family, FAMILIES + ("auto",))
        if self.select not in ("aicc", "average"):
            raise choices_error("convergence.select", self.select, ("aicc", "average"))

    def fit(self, x: Any, loss: Any = None) -> ConvergenceResult:
        """Fit the families to ``loss`` vs ``x`` (arrays, or a DataFrame with columns ``x`` and ``loss``)."""
        with single_thread_blas():
            return self._fit(x, loss)

    def _fit(self, x: Any, loss: Any) -> ConvergenceResult:
        if loss is None and hasattr(x, "columns"):
            df = x
            for c in ("x", "loss"):
                if c not in df.columns:
                    raise ModelInputError(f"convergence data: no column {c!r}; columns present: {', '.join(map(str, df.columns))}")
            x, loss = df["x"], df["loss"]
        xs = as_float_array(x, "x")
        ys = as_float_array(loss, "loss")
        if xs.size != ys.size:
            raise ModelInputError(f"convergence data: {xs.size} x values but {ys.size} losses")
        if np.any(xs <= 0):
            raise ModelInputError("convergence data: x (steps/tokens/samples) must be > 0")
        order = np.argsort(xs, kind="stable")
        xs, ys = xs[order], ys[order]
        fams = FAMILIES if self.family == "auto" else (self.family,)
        fits: dict[str, FitResult] = {}
        n_distinct = np.unique(xs).size
        # auto: a family needs k + 3 points (AICc defined, residual dof >= 2); a short curve falls back to k + 1
        for extra in ((3, 1) if self.family == "auto" else (1,)):
            for fam in fams:
                k = len(_NAMES[fam])
                need = k + extra
                if xs.size < need or n_distinct < k:
                    if self.family != "auto":
                        raise ModelInputError(f"convergence.family={fam}: needs at least {need} points, got {xs.size}")
                    continue
                r = _fit_one(fam, xs, ys)
                if r is not None:
                    fits[fam] = r
            if fits:
                break
        if not fits:
            raise ModelInputError(f"convergence data: could not fit any family to {xs.size} points")
        n = xs.size
        best_rss = min(fits, key=lambda f: fits[f].rss)
        c_hat = float(fits[best_rss].meta["c_hat"])
        crit = {}
        for f, r in fits.items():
            K = r.k
            d = n - K - 1
            ll = n * math.log(max(r.rss, 1e-300) / n) / c_hat
            crit[f] = ll + 2 * K + (2 * K * (K + 1) / d if d > 0 else math.inf)
        finite = {f: c for f, c in crit.items() if math.isfinite(c)} or crit
        dmin = min(finite.values())
        w = {f: math.exp(-(c - dmin) / 2) if math.isfinite(c) else 0.0 for f, c in crit.items()}
        lfo = _leave_future_out(fits, xs, ys) if self.select == "average" and self.family == "auto" else {}
        if lfo:
            # stacking-lite: weight by out-of-sample extrapolation skill on the curve's own future
            tau2 = max(min(v["mse"] for v in lfo.values()), LFO_FLOOR**2)
            w = {f: (math.exp(-0.5 * lfo[f]["sse"] / tau2) if f in lfo else 0.0) for f in fits}
            if sum(w.values()) <= 0:
                w = {f: 1.0 for f in lfo}
        tot = sum(w.values()) or 1.0
        best = max(w, key=lambda f: (w[f], -crit[f])) if self.select == "average" else \
            min(fits, key=lambda f: fits[f].aicc if math.isfinite(fits[f].aicc) else fits[f].aic)
        cands = {f: {"aic": r.aic, "aicc": r.aicc, "bic": r.bic, "qaicc": crit[f], "rss": r.rss,
                     "c_hat": float(r.meta["c_hat"]), "weight": w[f] / tot,
                     **({"lfo_rmse_log_x": math.sqrt(lfo[f]["mse"]), "lfo_log_ratio": lfo[f]["log_ratio"]}
                        if f in lfo else {})} for f, r in fits.items()}
        r = fits[best]
        return ConvergenceResult(model=best, names=r.names, values=r.values, cov=r.cov, n=r.n, dof=r.dof, rss=r.rss,
                                 meta={"select": self.select, "c_hat_selection": c_hat, **r.meta}, family=best,
                                 x_max=float(xs.max()), candidates=cands,
                                 others={f: v for f, v in fits.items() if f != best}, select=self.select,
                                 x_data=xs, y_data=ys)


def _leave_future_out(fits: dict[str, FitResult], x: np.ndarray, y: np.ndarray) -> dict[str, dict[str, float]]:
    """Each family's error in log x-to-target when refitted on the first ``LFO_CUTS`` of the curve.

    The pseudo-target is the median of the last 3 losses, reached at the median of their x: a future the
    refit has not seen (Buerkner, Gabry & Vehtari 2020, "Approximate leave-future-out cross-validation for
    Bayesian time series models", J. Stat. Comput. Simul. 90). Errors are capped at |ln 10|. Empty if the
    curve is too short (fewer than 8 points).
    """
    n = x.size
    if n < 8:
        return {}
    t_pseudo, x_end = float(np.median(y[-3:])), float(np.median(x[-3:]))
    out: dict[str, dict[str, float]] = {}
    for fam in fits:
        k = len(_NAMES[fam])
        errs, ratios = [], []
        for frac in LFO_CUTS:
            m = int(round(frac * n))
            if m < k + 3 or m > n - 2:
                continue
            r = _fit_one(fam, x[:m], y[:m])
            if r is None:
                continue
            xs = float(x_to_target(fam, r.values, t_pseudo, 1e4 * x[m - 1])[0])
            e = math.log(xs / x_end) if math.isfinite(xs) and xs > 0 else math.log(10.0)
            errs.append(max(min(e, math.log(10.0)), -math.log(10.0)))
            ratios.append(math.log(x_end / x[m - 1]))
        if errs:
            e = np.array(errs)
            out[fam] = {"sse": float(e @ e), "mse": max(float(e @ e) / e.size, LFO_FLOOR**2),
                        "log_ratio": float(np.mean(ratios))}
    return out


def _basis(fam: str, theta: tuple[float, ...], x: np.ndarray, lx: np.ndarray) -> np.ndarray:
    if fam == "power":
        return np.column_stack([np.exp(-theta[0] * lx), np.ones_like(x)])
    if fam == "power0":
        return np.exp(-theta[0] * lx)[:, None]
    if fam == "exp":
        return np.column_stack([np.exp(-x / theta[0]), np.ones_like(x)])
    if fam == "power_shift":
        return np.column_stack([np.power(x + theta[1], -theta[0]), np.ones_like(x)])
    if fam == "exp2":
        return np.column_stack([np.exp(-x / theta[0]), np.exp(-x / theta[1]), np.ones_like(x)])
    return np.column_stack([np.exp(-x / theta[0]), np.ones_like(x), -x])  # exp_drift


def _assemble(fam: str, theta: tuple[float, ...], lin: np.ndarray) -> np.ndarray:
    if fam in ("power", "exp"):
        return np.array([lin[0], theta[0], lin[1]])
    if fam == "power0":
        return np.array([lin[0], theta[0]])
    if fam == "power_shift":
        return np.array([lin[0], theta[0], lin[1], theta[1]])
    if fam == "exp2":
        return np.array([lin[0], theta[0], lin[1], theta[1], lin[2]])
    return np.array([lin[0], theta[0], lin[1], lin[2]])


def _grids(fam: str, x: np.ndarray) -> list[np.ndarray]:
    """Log-spaced grids of the nonlinear parameters (natural log of the parameter)."""
    x_min, x_max = float(x.min()), float(x.max())
    span = max(x_max - x_min, x_max * 1e-6)
    b = np.linspace(math.log(1e-3), math.log(5.0), 20)
    tau = np.linspace(math.log(span / 50), math.log(x_max * 20), 20)
    if fam in ("power", "power0"):
        return [b]
    if fam in ("exp", "exp_drift"):
        return [tau]
    if fam == "power_shift":
        return [np.linspace(math.log(1e-2), math.log(20.0), 9),
                np.linspace(math.log(span * 1e-3), math.log(x_max * 100), 9)]
    t = np.linspace(math.log(span / 50), math.log(x_max * 20), 10)
    return [t, t]  # exp2 (tau1 < tau2 enforced)


def _fit_one(fam: str, x: np.ndarray, y: np.ndarray) -> FitResult | None:
    """Variable projection over the family's 1 or 2 nonlinear parameters; covariance on the full parameters."""
    from scipy.optimize import minimize, minimize_scalar

    lx = np.log(x)
    n = x.size
    ysd = float(np.std(y)) or 1.0

    def solve(log_theta, exact: bool = False) -> tuple[float, np.ndarray | None]:
        theta = tuple(math.exp(t) for t in np.atleast_1d(log_theta))
        if fam == "exp2" and not theta[0] < theta[1]:
            return math.inf, None
        with np.errstate(all="ignore"):
            G = _basis(fam, theta, x, lx)
        if not np.all(np.isfinite(G)):
            return math.inf, None
        norms = np.sqrt(np.einsum("ij,ij->j", G, G))
        if np.any(norms <= 0):
            return math.inf, None
        target = y / ysd  # scaled for conditioning; the amplitudes are mapped back below
        Gs = G / norms
        if exact:
            coef, *_ = np.linalg.lstsq(Gs, target, rcond=None)
        else:  # the search: normal equations of unit columns (10x cheaper); the optimum is re-solved exactly
            try:
                coef = np.linalg.solve(Gs.T @ Gs, Gs.T @ target)
            except np.linalg.LinAlgError:
                coef, *_ = np.linalg.lstsq(Gs, target, rcond=None)
        coef = coef / norms
        r = target - G @ coef
        return float(r @ r), coef * ysd

    grids = _grids(fam, x)
    if len(grids) == 1:
        g = grids[0]
        rss = np.array([solve(t)[0] for t in g])
        if not np.isfinite(rss).any():
            return None
        i = int(np.nanargmin(np.where(np.isfinite(rss), rss, np.nan)))
        lo, hi = g[max(i - 1, 0)], g[min(i + 1, g.size - 1)]
        opt = minimize_scalar(lambda t: solve(t)[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-7})
        t_best = np.array([float(opt.x)]) if opt.fun <= rss[i] else np.array([g[i]])
        edge = i in (0, g.size - 1)
    else:
        g1, g2 = grids
        best, bi = math.inf, None
        for i1, t1 in enumerate(g1):
            for i2, t2 in enumerate(g2):
                v = solve((t1, t2))[0]
                if v < best:
                    best, bi = v, (i1, i2)
        if bi is None:
            return None
        start = np.array([g1[bi[0]], g2[bi[1]]])
        bounds = [(g1[0] - 1, g1[-1] + 1), (g2[0] - 1, g2[-1] + 1)]
        opt = minimize(lambda t: solve(t)[0], start, method="Nelder-Mead", bounds=bounds,
                       options={"xatol": 1e-3, "fatol": 1e-9 * max(best, 1e-300), "maxiter": 120})
        t_best = opt.x if opt.fun <= best else start
        edge = bi[0] in (0, g1.size - 1) or bi[1] in (0, g2.size - 1)
    rss_s, lin = solve(t_best, exact=True)
    if lin is None or not math.isfinite(rss_s):
        return None
    theta = tuple(math.exp(t) for t in np.atleast_1d(t_best))
    values = _assemble(fam, theta, lin)
    f = _F[fam]
    with np.errstate(all="ignore"):
        resid = y - f(x, values)
    rss = float(resid @ resid)
    k = values.size
    dof = n - k
    s2 = rss / dof if dof > 0 else math.inf
    with np.errstate(all="ignore"):
        J = jacobian(lambda p: f(x, p), values)
    cov = cov_from_jacobian(J, s2)
    rho = float(np.sum(resid[1:] * resid[:-1]) / rss) if rss > 0 and n > 2 else 0.0
    rho = min(max(rho, 0.0), 0.9)
    c_hat = (1 + rho) / (1 - rho)
    with np.errstate(all="ignore"):
        drop = float(f(np.array([x[0]]), values)[0] - f(np.array([x[-1]]), values)[0])
    return FitResult(model=fam, names=_NAMES[fam], values=values, cov=cov, n=int(n), dof=int(dof), rss=rss,
                     meta={"method": "variable projection", "theta_at_grid_edge": bool(edge), "rho": rho,
                           "c_hat": c_hat, "not_decaying": not drop > 0})
