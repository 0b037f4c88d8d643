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
(constant relative noise across scales, which is how timing noise behaves), or
``errors="auto"`` (the default): both are fitted and the one with the higher
Gaussian likelihood *on the throughput scale* wins -- the log fit's likelihood
carries the Jacobian ``-sum ln y`` of the transform (Box & Cox, JRSS B 26,
1964, sec. 3), so the two are comparable. When 3 or more device counts were run
at least twice, the likelihood is that of the repeats' scatter around their own
means (pure error, :func:`pure_error_loglik`): how the noise scales is then read
from the repeats, not from how well a curve fits. The covariance is ``s^2 (J^T J)^-1``
on the column-scaled Jacobian (:func:`hwmodels.results.cov_from_jacobian`),
cross-checked against statsmodels OLS on the linearized model in the tests.
Parameter intervals are Wald/Student t (see :mod:`hwmodels.results`).

**Two intervals.** ``predict(..., interval="confidence")`` is the interval of
the mean curve (delta method, ``g^T Cov g``); ``interval="prediction"`` (the
default) is for one new run and adds the run-to-run noise ``s^2``:
``y_hat +/- t * sqrt(g^T Cov g + s^2)``. Both are always returned
(``ci_lo/ci_hi``, ``pi_lo/pi_hi``); ``noise`` says where the run-to-run
variance comes from (the residuals, and the pure-error variance of repeated
runs at one device count when there are repeats).

**Selection.** ``model="auto"`` picks the model with the lowest BIC (Schwarz
1978; ``criterion=`` may choose ``aic`` or ``aicc``, all three are reported in
``candidates``), except that the USL is taken whenever the data bend: its fitted
peak ``N*`` lies inside the measured range and its ``kappa`` is positive at 95%
(one-sided) -- a throughput that falls with more devices is something Amdahl
cannot represent, whatever the criterion says. BIC is the default because
scaling sweeps are short (5-10 points): AICc's small-sample penalty
``2k(k+1)/(n-k-1)`` then dominates and rejects the USL even on data whose
throughput visibly falls (the SPEC SDM91 case in the tests). Scaling efficiency
is ``X(N) / (N * X(1))``.

**Identifiability.** Amdahl has 2 parameters and the USL 3; with device counts
at fewer than 3 distinct values the contention and the one-device throughput
cannot be told apart from noise (any curve through two points fits). Such a
result has ``identifiable=False`` and a ``message``; ``predict`` refuses
(``ModelInputError``), so a non-identified fit is never shown as a prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hwmodels.errors import ModelInputError, choices_error
from hwmodels.results import FitResult, as_float_array, check_alpha, jacobian, nls, t_quantile

MODELS = ("amdahl", "usl")
ERRORS = ("additive", "multiplicative", "auto")


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
    identifiable: bool = True
    message: str = "ok"
    noise: dict[str, Any] = field(default_factory=dict)

    def _f(self, n, p=None):
        return _FUNCS[self.model](np.asarray(n, dtype=float), self.values if p is None else p)

    def predict(self, n: Any, *, alpha: float = 0.05, interval: str = "prediction") -> dict[str, np.ndarray]:
        """Throughput at ``n`` devices with a ``1-alpha`` interval.

        ``interval="prediction"`` (a new run: mean-curve uncertainty plus run-to-run noise) or
        ``"confidence"`` (the mean curve) sets ``lo``/``hi``; both are also returned as
        ``pi_lo/pi_hi`` and ``ci_lo/ci_hi``. Refuses a non-identifiable fit.
        """
        alpha = check_alpha(alpha)
        if interval not in ("prediction", "confidence"):
            raise choices_error("interval", interval, ("prediction", "confidence"))
        if not self.identifiable:
            raise ModelInputError(f"scaling: no prediction: {self.message}")
        n = np.atleast_1d(np.asarray(n, dtype=float))
        if np.any(n <= 0):
            raise ModelInputError("predict: device counts must be > 0")
        t = t_quantile(1 - alpha / 2, self.dof)
        if self.errors == "multiplicative":
            g = lambda p: np.log(np.maximum(self._f(n, p), 1e-300))  # noqa: E731
        else:
            g = lambda p: self._f(n, p)  # noqa: E731
        J = jacobian(g, self.values)
        with np.errstate(invalid="ignore"):
            var_mean = np.einsum("ij,jk,ik->i", J, np.nan_to_num(self.cov, posinf=1e300), J)
        mid = g(self.values)
        out = {"x": n}
        pi_var = self.noise.get("pi_var", self.sigma2)
        for tag, var in (("ci", var_mean), ("pi", var_mean + pi_var)):
            half = t * np.sqrt(np.maximum(var, 0))
            lo, hi = mid - half, mid + half
            if self.errors == "multiplicative":
                lo, hi = np.exp(lo), np.exp(hi)
            out[f"{tag}_lo"], out[f"{tag}_hi"] = lo, hi
        y = np.exp(mid) if self.errors == "multiplicative" else mid
        tag = "pi" if interval == "prediction" else "ci"
        out.update(y=y, lo=out[f"{tag}_lo"], hi=out[f"{tag}_hi"], interval=interval)
        return out

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
        d.update(errors=self.errors, candidates=self.candidates, peak_devices=self.peak_devices(),
                 identifiable=self.identifiable, message=self.message, noise=self.noise)
        return d


def efficiency(devices: Any, throughput: Any) -> np.ndarray:
    """Measured scaling efficiency vs the smallest measured scale: ``(X/N) / (X0/N0)``."""
    n = as_float_array(devices, "devices")
    x = as_float_array(throughput, "throughput")
    i = int(np.argmin(n))
    return (x / n) / (x[i] / n[i])


#: repeats needed before the run-to-run scatter decides the error model: device counts with >= 2 runs
PURE_ERROR_MIN_GROUPS = 3


def pure_error_loglik(n: np.ndarray, x: np.ndarray) -> dict[str, float] | None:
    """Log-likelihoods, on the throughput scale, of the repeats' scatter around their own group means under
    a constant sd (additive) and a constant relative sd (multiplicative: normal on log throughput, with the
    Jacobian ``-sum ln y``), each variance profiled out (maximum likelihood over the ``m`` repeated runs, as
    the Box-Cox comparison needs the same count in both); ``None`` with fewer than
    :data:`PURE_ERROR_MIN_GROUPS` device counts measured at least twice (or no scatter at all).

    This judges how the noise scales from the repeats alone, so a curve that misses the data (lack of fit)
    cannot decide it, as it does when the residuals are compared.
    """
    dev_a = dev_m = 0.0
    k = m = 0
    logy = []
    for v in np.unique(n):
        y = x[n == v]
        if y.size < 2:
            continue
        k += 1
        m += y.size
        dev_a += float(np.sum((y - y.mean()) ** 2))
        ly = np.log(y)
        dev_m += float(np.sum((ly - ly.mean()) ** 2))
        logy.append(float(np.sum(ly)))
    if k < PURE_ERROR_MIN_GROUPS or dev_a <= 0 or dev_m <= 0:
        return None
    return {"additive": -0.5 * m * math.log(dev_a / m),
            "multiplicative": -0.5 * m * math.log(dev_m / m) - sum(logy)}


@dataclass(frozen=True, kw_only=True)
class Scaling:
    """``Scaling(model="auto"|"amdahl"|"usl", errors="auto"|"additive"|"multiplicative").fit(n, x)``."""

    model: str = "auto"
    errors: str = "auto"
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
        distinct = np.unique(n).size
        if distinct < 3:
            return self._not_identifiable(n, x, distinct)
        if self.errors == "auto":
            fits = {e: self._select(n, x, e) for e in ("additive", "multiplicative")}
            pure = pure_error_loglik(n, x)
            if pure is not None:
                # repeated runs say how the run-to-run noise scales, apart from how well any curve fits
                best_e = max(pure, key=pure.get)
                r = fits[best_e]
                meta = dict(r.meta, errors_selected_by="scatter of repeated runs (pure error) on the throughput "
                                                       "scale: constant sd vs constant relative sd",
                            loglik_pure_additive=pure["additive"], loglik_pure_multiplicative=pure["multiplicative"])
                return replace(r, meta=meta)
            # Gaussian log-likelihood on the throughput scale, variance profiled out; the log fit pays -sum ln y
            ll = {e: -0.5 * r.n * math.log(max(r.rss, 1e-300) / r.n) - (float(np.sum(np.log(x))) if e == "multiplicative" else 0.0)
                  for e, r in fits.items()}
            best_e = max(ll, key=ll.get)
            r = fits[best_e]
            meta = dict(r.meta, errors_selected_by="likelihood on the throughput scale",
                        loglik_additive=ll["additive"], loglik_multiplicative=ll["multiplicative"])
            return replace(r, meta=meta)
        return self._select(n, x, self.errors)

    def _select(self, n: np.ndarray, x: np.ndarray, errors: str) -> ScalingResult:
        models = MODELS if self.model == "auto" else (self.model,)
        fits = {}
        for m in models:
            need = len(_NAMES[m]) + 1
            if np.unique(n).size < len(_NAMES[m]) or n.size < need:
                if self.model != "auto":
                    raise ModelInputError(f"scaling.model={m}: needs at least {need} points at "
                                          f"{len(_NAMES[m])} distinct device counts, got {n.size}")
                continue
            fits[m] = self._fit_one(m, n, x, errors)
        if not fits:
            raise ModelInputError(f"scaling data: too few points ({n.size}) to fit any model")
        cands = {m: {"aic": r.aic, "aicc": r.aicc, "bic": r.bic, "rss": r.rss} for m, r in fits.items()}
        best = min(fits, key=lambda m: (getattr(fits[m], self.criterion), len(_NAMES[m])))
        selected_by = self.criterion if len(fits) > 1 else "user"
        if "usl" in fits and best != "usl":
            u = fits["usl"]
            lo_kappa = u.values[2] - t_quantile(0.95, u.dof) * u.bse["kappa"]
            if u.peak_devices() <= float(n.max()) and lo_kappa > 0:
                best, selected_by = "usl", "bend (USL peak inside the measured range, kappa > 0 at 95%)"
        r = fits[best]
        noise = _noise(n, x, r, errors)
        meta = {"criterion": self.criterion, "selected_by": selected_by}
        if noise["lack_of_fit"]:
            meta["warning"] = (f"lack of fit: the {r.model} curve misses the repeated runs' means by more than their "
                               f"noise (F test p = {noise['lack_of_fit_p']:.2g}); intervals use the between-count scatter")
            return replace(r, cov=r.cov * noise["cov_scale"], dof=int(noise["pi_dof"]), meta=meta, candidates=cands,
                           noise=noise)
        return replace(r, meta=meta, candidates=cands, noise=noise)

    def _not_identifiable(self, n: np.ndarray, x: np.ndarray, distinct: int) -> ScalingResult:
        msg = (f"not identifiable: device counts take {distinct} distinct value(s) ({', '.join(f'{v:g}' for v in np.unique(n))}); "
               "at least 3 are needed to separate contention from noise -- not enough data for a prediction")
        names = _NAMES["amdahl"] if self.model == "auto" else _NAMES[self.model]
        k = len(names)
        return ScalingResult(model="amdahl" if self.model == "auto" else self.model, names=names,
                             values=np.full(k, np.nan), cov=np.full((k, k), np.inf), n=int(n.size),
                             dof=max(int(n.size) - k, 0), rss=math.nan, meta={"selected_by": "none"},
                             errors="additive" if self.errors == "auto" else self.errors, identifiable=False, message=msg)

    def _fit_one(self, m: str, n: np.ndarray, x: np.ndarray, errors: str) -> ScalingResult:
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
        if errors == "multiplicative":
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
                             errors=errors)


def _noise(n: np.ndarray, x: np.ndarray, r: ScalingResult, errors: str) -> dict[str, Any]:
    """Run-to-run noise behind the prediction interval, and the lack-of-fit test when runs are repeated.

    Without repeats: the residual variance ``s^2 = RSS/(n-p)`` is the noise of a new run. With repeats
    (``g`` device counts, ``n`` runs), RSS splits into pure error ``SS_pe`` (``n-g`` dof) and lack of fit
    ``SS_lof`` (``g-p`` dof) (Draper & Smith, *Applied Regression Analysis*, 3rd ed., 1998, sec. 2.1). When
    the F test ``MS_lof/MS_pe`` rejects at 5%, the curve itself is off by more than the noise: the mean-curve
    covariance is rescaled by ``MS_lof/s^2`` with ``g-p`` dof (the group means are the real replicates), and a
    new run's variance is ``sigma_lof^2 + MS_pe`` with ``sigma_lof^2 = (MS_lof - MS_pe)/m`` (``m`` runs per
    count on average): a model error the next configuration will carry, not only run-to-run noise.
    """
    from scipy import stats

    yy = np.log(x) if errors == "multiplicative" else x
    ug, inv, cnt = np.unique(n, return_inverse=True, return_counts=True)
    out: dict[str, Any] = {"scale": "log throughput" if errors == "multiplicative" else "throughput",
                           "residual_sd": math.sqrt(r.sigma2) if r.dof > 0 else math.nan, "residual_dof": r.dof,
                           "pi_var": r.sigma2, "pi_dof": r.dof, "lack_of_fit": False, "source": "residuals"}
    pe_dof = int(n.size - ug.size)
    k = len(r.names)
    if pe_dof > 0 and ug.size > k and math.isfinite(r.rss):
        ybar = np.bincount(inv, weights=yy) / cnt
        ss_pe = float(np.sum((yy - ybar[inv]) ** 2))
        ms_pe = ss_pe / pe_dof
        lof_dof = int(ug.size - k)
        ms_lof = max(r.rss - ss_pe, 0.0) / lof_dof
        p_lof = float(stats.f.sf(ms_lof / ms_pe, lof_dof, pe_dof)) if ms_pe > 0 else 0.0
        out.update(repeats_sd=math.sqrt(ms_pe), repeats_dof=pe_dof, lack_of_fit_p=p_lof, source="repeats")
        if p_lof < 0.05:
            m = n.size / ug.size
            out.update(lack_of_fit=True, lof_sd=math.sqrt(max(ms_lof - ms_pe, 0.0) / m), cov_scale=ms_lof / r.sigma2,
                       pi_var=max(ms_lof - ms_pe, 0.0) / m + ms_pe, pi_dof=lof_dof)
    return out
