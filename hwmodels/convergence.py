"""Eval-loss curves: fit, compare families, and predict x (steps/tokens/samples) to a target.

Families (``x`` > 0 is steps, tokens or samples; ``L`` the eval loss):

* ``power``: ``L(x) = a x^-b + c`` -- power law with an irreducible offset
  (Kaplan et al. 2020, "Scaling laws for neural language models", eq. 1.2-1.3
  in data; Hoffmann et al. 2022 "Chinchilla", eq. 2 with the model size fixed:
  ``L(D) = (E + A/N^alpha) + B/D^beta``).
* ``exp``: ``L(x) = a exp(-x / tau) + c`` -- exponential decay to an offset
  (the linear-convergence regime of gradient descent on strongly convex losses).
* ``power0``: ``L(x) = a x^-b`` -- Kaplan's pure power law (no offset).

Each is fitted by least squares (additive Gaussian noise on the loss),
by variable projection (see ``Convergence._fit_one``). ``family="auto"`` picks the lowest AICc (Burnham & Anderson 2002;
reported with Akaike weights ``w_i = exp(-d_i/2)/sum exp(-d_j/2)``);
``select="average"`` instead mixes the families' predictions by those weights.

**x to target** ``T``: ``power``: ``x* = (a/(T-c))^(1/b)``; ``exp``:
``x* = -tau ln((T-c)/a)``; ``power0``: ``x* = (a/T)^(1/b)``. Unreachable when
``T <= c`` (the target is at or below the fitted asymptote). The interval is
Monte Carlo over the asymptotic normal distribution of the parameters
(``theta ~ N(theta_hat, Cov)``, 4000 draws; the delta method's first-order
distribution, but evaluated through the nonlinear ``x*`` so that draws whose
asymptote lies above the target count as unreachable, i.e. ``x* = inf``). The
result says ``reachable`` and ``reliable``: unreliable when the upper bound is
infinite (P(unreachable) > (1-level)/2), when ``hi/lo > max_ratio`` (default
10), or when ``x*`` extrapolates more than ``max_extrapolation`` (default 10x)
beyond the largest observed ``x``; ``message`` says which, plainly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import FitResult, as_float_array, check_alpha, dot, single_thread_blas

FAMILIES = ("power", "exp", "power0")


def f_power(x, p):
    return p[0] * np.power(x, -p[1]) + p[2]


def f_exp(x, p):
    return p[0] * np.exp(-x / p[1]) + p[2]


def f_power0(x, p):
    return p[0] * np.power(x, -p[1])


_F = {"power": f_power, "exp": f_exp, "power0": f_power0}
_NAMES = {"power": ("a", "b", "c"), "exp": ("a", "tau", "c"), "power0": ("a", "b")}


def x_to_target(family: str, p: np.ndarray, target: float) -> np.ndarray:
    """``x*`` for parameter rows ``p`` (shape (k,) or (m, k)); inf where unreachable."""
    P = np.atleast_2d(p)
    with np.errstate(all="ignore"):
        if family == "power":
            a, b, c = P[:, 0], P[:, 1], P[:, 2]
            gap = target - c
            x = np.where((gap > 0) & (a > 0) & (b > 0), np.power(a / gap, 1 / b), np.inf)
        elif family == "exp":
            a, tau, c = P[:, 0], P[:, 1], P[:, 2]
            gap = target - c
            x = np.where((gap > 0) & (a > 0) & (tau > 0), -tau * np.log(np.minimum(gap / a, 1.0)), np.inf)
        else:
            a, b = P[:, 0], P[:, 1]
            x = np.where((target > 0) & (a > 0) & (b > 0), np.power(a / target, 1 / b), np.inf)
    x = np.where(np.isnan(x), np.inf, x)
    return x if np.ndim(p) > 1 else x[:1]


@dataclass(frozen=True, eq=False)
class ConvergenceResult(FitResult):
    family: str = "power"
    x_max: float = 1.0
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)
    others: dict[str, FitResult] = field(default_factory=dict)
    select: str = "aicc"

    def predict(self, x: Any) -> np.ndarray:
        return _F[self.family](np.atleast_1d(np.asarray(x, dtype=float)), self.values)

    @property
    def asymptote(self) -> float:
        return float(self.values[2]) if self.family in ("power", "exp") else 0.0

    def _draws(self, fam: str, res: FitResult, m: int, rng) -> np.ndarray:
        cov = np.nan_to_num(res.cov, nan=0.0, posinf=0.0, neginf=0.0)
        try:
            return rng.multivariate_normal(res.values, cov, size=m, method="svd", check_valid="ignore")
        except (ValueError, np.linalg.LinAlgError):
            return np.repeat(res.values[None, :], m, axis=0)

    def x_to_target(self, target: float, *, level: float = 0.9, n_draws: int = 4000, seed: int = 0,
                    max_ratio: float = 10.0, max_extrapolation: float = 10.0) -> dict[str, Any]:
        """Point estimate and ``level`` interval of the x at which the loss reaches ``target``."""
        level = 1 - check_alpha(1 - level, "level")
        rng = np.random.default_rng(seed)
        fams = {self.family: self}
        if self.select == "average":
            fams.update(self.others)
        weights = {f: self.candidates.get(f, {}).get("weight", 1.0) for f in fams}
        if self.select != "average":
            weights = {self.family: 1.0}
        tot = sum(weights.values()) or 1.0
        draws, points = [], {}
        for fam, res in fams.items():
            m = int(round(n_draws * weights[fam] / tot))
            if m <= 0:
                continue
            draws.append(x_to_target(fam, self._draws(fam, res, m, rng), target))
            points[fam] = float(x_to_target(fam, res.values, target)[0])
        d = np.sort(np.concatenate(draws)) if draws else np.array([math.inf])
        lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
        lo = float(d[min(int(math.floor(lo_q * (d.size - 1))), d.size - 1)])
        hi = float(d[min(int(math.ceil(hi_q * (d.size - 1))), d.size - 1)])
        p_unreach = float(np.mean(~np.isfinite(d)))
        if self.select == "average":
            x_hat = float(np.median(d))
            reachable = math.isfinite(x_hat)
        else:
            x_hat = points[self.family]
            reachable = math.isfinite(x_hat)
        problems = []
        if self.meta.get("theta_at_grid_edge"):
            problems.append(f"the {self.family} fit's {self.names[1]} sits at the edge of the searched range; "
                            "the data do not look like a decaying loss curve")
        if not reachable:
            problems.append(f"unreachable: target {target:g} is at or below the fitted asymptote "
                            f"{self.asymptote:.4g} of the {self.family} fit")
        else:
            if not math.isfinite(hi):
                problems.append(f"interval too wide: the upper bound is unbounded ({p_unreach:.0%} of parameter "
                                f"draws put the asymptote above the target)")
            elif lo > 0 and hi / lo > max_ratio:
                problems.append(f"interval too wide: hi/lo = {hi / lo:.3g} > {max_ratio:g}")
            if x_hat > max_extrapolation * self.x_max:
                problems.append(f"extrapolation: x* = {x_hat:.4g} is {x_hat / self.x_max:.3g}x the largest observed "
                                f"x ({self.x_max:.4g}); more than {max_extrapolation:g}x is not supported by the data")
        return {"target": float(target), "x_to_target": x_hat, "lo": lo, "hi": hi, "level": level,
                "reachable": reachable, "reliable": reachable and not problems, "p_unreachable": p_unreach,
                "message": "; ".join(problems) if problems else "ok", "model": self.family,
                "draws": d}

    def to_dict(self, alpha: float = 0.05) -> dict[str, Any]:
        d = super().to_dict(alpha)
        d.update(family=self.family, asymptote=self.asymptote, candidates=self.candidates, select=self.select,
                 x_max=self.x_max)
        return d


@dataclass(frozen=True, kw_only=True)
class Convergence:
    """``Convergence(family="auto"|"power"|"exp"|"power0", select="aicc"|"average").fit(x, loss)``."""

    family: str = "auto"
    select: str = "aicc"

    def __post_init__(self) -> None:
        if self.family not in FAMILIES + ("auto",):
            raise choices_error("convergence.family", self.family, FAMILIES + ("auto",))
        if self.select not in ("aicc", "average"):
            raise choices_error("convergence.select", self.select, ("aicc", "average"))

    def fit(self, x: Any, loss: Any = None) -> ConvergenceResult:
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
        fams = FAMILIES if self.family == "auto" else (self.family,)
        fits: dict[str, FitResult] = {}
        n_distinct = np.unique(xs).size
        for fam in fams:
            k = len(_NAMES[fam])
            if xs.size < k + 1 or n_distinct < k:
                if self.family != "auto":
                    raise ModelInputError(f"convergence.family={fam}: needs at least {k + 1} points, got {xs.size}")
                continue
            with single_thread_blas():
                r = self._fit_one(fam, xs, ys)
            if r is not None:
                fits[fam] = r
        if not fits:
            raise ModelInputError(f"convergence data: could not fit any family to {xs.size} points")
        crit = {f: r.aicc if math.isfinite(r.aicc) else r.aic for f, r in fits.items()}
        best = min(crit, key=crit.get)
        dmin = crit[best]
        w = {f: math.exp(-(c - dmin) / 2) for f, c in crit.items()}
        tot = sum(w.values())
        cands = {f: {"aic": r.aic, "aicc": r.aicc, "bic": r.bic, "rss": r.rss, "weight": w[f] / tot} for f, r in fits.items()}
        r = fits[best]
        return ConvergenceResult(model=best, names=r.names, values=r.values, cov=r.cov, n=r.n, dof=r.dof, rss=r.rss,
                                 meta={"select": self.select, **r.meta}, family=best, x_max=float(xs.max()), candidates=cands,
                                 others={f: v for f, v in fits.items() if f != best}, select=self.select)

    @staticmethod
    def _fit_one(fam: str, x: np.ndarray, y: np.ndarray) -> FitResult | None:
        """Variable projection (Golub & Pereyra, SIAM J. Numer. Anal. 10, 1973).

        For a fixed nonlinear parameter (``b`` or ``tau``) the model is linear
        in ``a`` (and ``c``), solved exactly by least squares; the profile RSS
        is minimized over the one nonlinear parameter (a 25-point log grid,
        then bounded Brent). No starting values, one ``exp`` per evaluation,
        so a million points fit in about a second. Covariance from the
        analytic Jacobian at the optimum.
        """
        from scipy.optimize import minimize_scalar

        lx_full, x_full, y_full = np.log(x), x, y
        offset = fam != "power0"
        n = x.size
        # locate the bracket on an evenly strided subsample (<= 20k points), refine on all points
        step = max(1, n // 20000)
        lx, xx, yy = lx_full[::step], x_full[::step], y_full[::step]

        def basis(theta):
            return np.exp(-theta * lx) if fam != "exp" else np.exp(-xx / theta)

        def solve(theta):
            y = yy
            g = basis(theta)
            if offset:
                gm, ym = g.mean(), y.mean()
                gc = g - gm
                sgg = dot(gc, gc)
                if not sgg > 0:
                    return math.inf, (0.0, ym)
                a = dot(gc, y - ym) / sgg
                c = ym - a * gm
                r = y - a * g - c
                return dot(r, r), (a, c)
            sgg = dot(g, g)
            a = dot(g, y) / sgg if sgg > 0 else 0.0
            r = y - a * g
            return dot(r, r), (a,)

        if fam == "exp":
            lo, hi = math.log(float(x.min()) / 20), math.log(float(x.max()) * 20)
        else:
            lo, hi = math.log(1e-3), math.log(5.0)
        grid = np.linspace(lo, hi, 25)
        rss = np.array([solve(math.exp(t))[0] for t in grid])
        if not np.isfinite(rss).any():
            return None
        i = int(np.nanargmin(np.where(np.isfinite(rss), rss, np.nan)))
        a_, b_ = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        lx, xx, yy = lx_full, x_full, y_full
        rss_i = solve(math.exp(grid[i]))[0]
        opt = minimize_scalar(lambda t: solve(math.exp(t))[0], bounds=(a_, b_), method="bounded",
                              options={"xatol": 1e-6})  # |d ln theta| < 1e-6, far inside any CI
        theta = math.exp(float(opt.x)) if opt.fun <= rss_i else math.exp(float(grid[i]))
        rss_v, lin = solve(theta)
        g = basis(theta)
        a = lin[0]
        x = x_full
        if fam == "exp":
            d_theta = a * g * x / theta**2
        else:
            d_theta = -a * lx * g
        cols = [g, d_theta] + ([np.ones(n)] if offset else [])
        J = np.column_stack(cols)
        values = np.array([a, theta, lin[1]] if offset else [a, theta])
        k = values.size
        dof = n - k
        s2 = rss_v / dof if dof > 0 else math.inf
        cov = np.linalg.pinv(J.T @ J) * s2
        return FitResult(model=fam, names=_NAMES[fam], values=values, cov=cov, n=int(n), dof=int(dof), rss=rss_v,
                         meta={"method": "variable projection", "theta_at_grid_edge": i in (0, grid.size - 1)})
