"""Eval-loss curves: fit, compare families, and predict x (steps/tokens/samples) to a target.

Families (``x`` > 0 is steps, tokens or samples; ``L`` the eval loss):

* ``power``: ``L(x) = a x^-b + c`` -- power law with an irreducible offset
  (Kaplan et al. 2020, "Scaling laws for neural language models", eq. 1.2-1.3
  in data; Hoffmann et al. 2022 "Chinchilla", eq. 2 with the model size fixed:
  ``L(D) = (E + A/N^alpha) + B/D^beta``).
* ``exp``: ``L(x) = a exp(-x / tau) + c`` -- exponential decay to an offset
  (the linear-convergence regime of gradient descent on strongly convex losses).
* ``power0``: ``L(x) = a x^-b`` -- Kaplan's pure power law (no offset).

Each is fitted by nonlinear least squares (additive Gaussian noise on the
loss). ``family="auto"`` picks the lowest AICc (Burnham & Anderson 2002;
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
from hwmodels.results import FitResult, as_float_array, check_alpha, nls

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
        for fam in fams:
            k = len(_NAMES[fam])
            if xs.size < k + 1 or np.unique(xs).size < k:
                if self.family != "auto":
                    raise ModelInputError(f"convergence.family={fam}: needs at least {k + 1} points, got {xs.size}")
                continue
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
                                 meta={"select": self.select}, family=best, x_max=float(xs.max()), candidates=cands,
                                 others={f: v for f, v in fits.items() if f != best}, select=self.select)

    @staticmethod
    def _fit_one(fam: str, x: np.ndarray, y: np.ndarray) -> FitResult | None:
        f = _F[fam]
        yr = float(y.max() - y.min()) or 1.0
        starts = []
        if fam == "power0":
            ok = y > 0
            if ok.sum() >= 2:
                b, la = np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)
                starts.append([math.exp(la), max(-b, 1e-3)])
            bounds = ([0, 0], [np.inf, np.inf])
        else:
            for frac in (0.5, 0.9, 0.99, 0.2):
                c0 = float(y.min()) - (1 - frac) * yr - 1e-9 * abs(float(y.min()))
                if fam == "power":
                    b, la = np.polyfit(np.log(x), np.log(np.maximum(y - c0, 1e-12)), 1)
                    starts.append([math.exp(la), max(-b, 1e-3), c0])
                else:
                    sl, la = np.polyfit(x, np.log(np.maximum(y - c0, 1e-12)), 1)
                    tau = -1 / sl if sl < 0 else float(x.max())
                    starts.append([math.exp(la), tau, c0])
            bounds = ([0, 0, -np.inf], [np.inf, np.inf, np.inf])
        best = None
        for p0 in starts:
            if not all(math.isfinite(v) for v in p0):
                continue
            try:
                p, cov, rss, dof = nls(f, x, y, p0, bounds=bounds)
            except (ValueError, np.linalg.LinAlgError, FloatingPointError):
                continue
            if best is None or rss < best[2]:
                best = (p, cov, rss, dof)
        if best is None:
            return None
        p, cov, rss, dof = best
        return FitResult(model=fam, names=_NAMES[fam], values=p, cov=cov, n=int(x.size), dof=int(dof), rss=rss)
