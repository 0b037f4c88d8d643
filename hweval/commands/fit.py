"""``hweval fit``: fit roofline / scaling / comms / convergence models to any CSV.

Every subcommand reads plain CSV with a header line, takes the column names
as options, reports rows with missing or non-numeric values (count and first
line number) on stderr and under ``bad_rows`` in the JSON, and exits 2 on bad
input (unknown column -> the message lists the columns present).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import click

from hweval.commands.common import echo_json
from hwcore.errors import InputError


def _model_errors(fn):
    """Re-raise hwmodels' ValueError-based input errors as hweval InputError (exit 2)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from hwmodels.errors import ModelInputError

        try:
            return fn(*args, **kwargs)
        except ModelInputError as exc:
            raise InputError(str(exc)) from exc

    return wrapper


def _floats(text: str | None, option: str) -> list[float] | None:
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            v = float(part)
        except ValueError:
            raise InputError(f"{option}: {part!r} is not a number (expected e.g. 1,2,4)") from None
        if not math.isfinite(v):
            raise InputError(f"{option}: {part!r} is not finite")
        out.append(v)
    if not out:
        raise InputError(f"{option}: no values given")
    return out


def _report_bad(bad, path: str) -> dict[str, Any]:
    if bad.count:
        click.echo(f"hweval: warning: {bad.message(path)}", err=True)
    return bad.to_dict()


def _level(level: float, option: str = "--level") -> float:
    if not 0 < level < 1:
        raise InputError(f"{option} must be in (0, 1), got {level}")
    return level


@click.group()
def fit() -> None:
    """Fit models to a CSV (scaling, convergence, comms, roofline)."""


@fit.command("scaling")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--x", "xcol", required=True, help="Column with the number of devices.")
@click.option("--y", "ycol", required=True, help="Column with the throughput (any unit; higher is better).")
@click.option("--model", type=click.Choice(["amdahl", "usl", "auto"]), default="auto", show_default=True,
              help="auto: the lower BIC of Amdahl and USL.")
@click.option("--errors", type=click.Choice(["additive", "multiplicative"]), default="additive", show_default=True,
              help="Noise model: constant absolute or constant relative error.")
@click.option("--predict", "predict", default=None, help="Device counts to predict at, e.g. 16,32,64 (default: the observed ones).")
@click.option("--level", type=float, default=0.95, show_default=True, help="Confidence/prediction level.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def scaling_cmd(file, xcol, ycol, model, errors, predict, level, as_json) -> None:
    """Amdahl / USL fit of throughput vs devices, with parameter CIs and prediction intervals."""
    import numpy as np

    from hwmodels.csvio import read_numeric
    from hwmodels.scaling import Scaling

    _level(level)
    xs = _floats(predict, "--predict")
    df, bad = read_numeric(file, [xcol, ycol], option={xcol: "--x", ycol: "--y"})
    bad_d = _report_bad(bad, file)
    res = Scaling(model=model, errors=errors).fit(df[xcol].to_numpy(), df[ycol].to_numpy())
    at = np.array(xs) if xs is not None else np.unique(df[xcol].to_numpy())
    if np.any(at <= 0):
        raise InputError("--predict: device counts must be > 0")
    alpha = 1 - level
    pred = res.predict(at, alpha=alpha)
    eff = res.efficiency(at)
    out = {
        "model": res.model,
        "params": res.params,
        "conf_int": {k: list(v) for k, v in res.conf_int(alpha).items()},
        "level": level,
        "predictions": [{"x": float(pred["x"][i]), "y": float(pred["y"][i]), "lo": float(pred["lo"][i]),
                         "hi": float(pred["hi"][i]), "efficiency": float(eff[i])} for i in range(at.size)],
        "criterion": res.meta.get("criterion"),
        "candidates": res.candidates,
        "peak_devices": res.peak_devices(),
        "errors": errors,
        "n": res.n,
        "bad_rows": bad_d,
    }
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary(alpha))
    for p in out["predictions"]:
        click.echo(f"  N={p['x']:g}: {p['y']:.4g} [{p['lo']:.4g}, {p['hi']:.4g}] efficiency {p['efficiency']:.1%}")


@fit.command("convergence")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--x", "xcol", required=True, help="Column with steps / tokens / samples (> 0).")
@click.option("--y", "ycol", required=True, help="Column with the eval loss.")
@click.option("--target", type=float, required=True, help="Target loss.")
@click.option("--level", type=float, default=0.9, show_default=True, help="Interval level for x to target.")
@click.option("--family", type=click.Choice(["auto", "power", "exp", "power0"]), default="auto", show_default=True)
@click.option("--select", type=click.Choice(["aicc", "average"]), default="aicc", show_default=True,
              help="Pick the best family by AICc, or average families by Akaike weight.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def convergence_cmd(file, xcol, ycol, target, level, family, select, as_json) -> None:
    """Fit an eval-loss curve and predict x to reach --target, with an interval."""
    from hwmodels.convergence import Convergence
    from hwmodels.csvio import read_numeric

    _level(level)
    if not math.isfinite(target):
        raise InputError("--target must be a finite number")
    df, bad = read_numeric(file, [xcol, ycol], option={xcol: "--x", ycol: "--y"})
    bad_d = _report_bad(bad, file)
    res = Convergence(family=family, select=select).fit(df[xcol].to_numpy(), df[ycol].to_numpy())
    xt = res.x_to_target(target, level=level)
    xt.pop("draws")
    out = {
        "model": res.model,
        "params": res.params,
        "conf_int": {k: list(v) for k, v in res.conf_int(1 - level).items()},
        "x_to_target": xt["x_to_target"],
        "lo": xt["lo"],
        "hi": xt["hi"],
        "level": level,
        "reachable": xt["reachable"],
        "reliable": xt["reliable"],
        "message": xt["message"],
        "p_unreachable": xt["p_unreachable"],
        "asymptote": res.asymptote,
        "candidates": res.candidates,
        "select": select,
        "n": res.n,
        "bad_rows": bad_d,
    }
    if not xt["reliable"]:
        click.echo(f"hweval: warning: {xt['message']}", err=True)
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary(1 - level))
    click.echo(f"x to loss {target:g}: {xt['x_to_target']:.4g} [{xt['lo']:.4g}, {xt['hi']:.4g}] ({level:.0%}); {xt['message']}")


@fit.command("comms")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--size", "sizecol", required=True, help="Column with the message size in bytes (nccl-tests 'size').")
@click.option("--busbw", "bwcol", required=True, help="Column with the bus bandwidth (nccl-tests 'busbw').")
@click.option("--busbw-unit", type=click.Choice(["GBps", "Bps"]), default="GBps", show_default=True,
              help="Unit of the busbw column (nccl-tests prints GB/s, 1 GB = 1e9 B); predictions use it too.")
@click.option("--ranks", type=click.IntRange(min=2), default=None,
              help="Rank count of the sweep (default: the CSV's 'ranks' column if it has one).")
@click.option("--collective", type=click.Choice(["all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                                  "broadcast", "reduce", "sendrecv"]), default="all_reduce",
              show_default=True, help="Sets the busbw factor (nccl-tests PERFORMANCE.md).")
@click.option("--predict", "predict", default=None, help="Sizes in bytes to predict at, e.g. 1e6,1e8.")
@click.option("--predict-ranks", type=click.IntRange(min=2), default=None,
              help="Project the predictions to this rank count (latency scaled by --latency-scaling).")
@click.option("--latency-scaling", type=click.Choice(["ring", "tree", "constant"]), default="ring", show_default=True)
@click.option("--level", type=float, default=0.95, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def comms_cmd(file, sizecol, bwcol, busbw_unit, ranks, collective, predict, predict_ranks, latency_scaling, level,
              as_json) -> None:
    """Alpha-beta fit t = alpha + F(n) S / B from a busbw-vs-size sweep."""
    import numpy as np

    from hwmodels.comms import AlphaBeta
    from hwmodels.csvio import read_csv, require_columns, numeric_columns

    _level(level)
    sizes = _floats(predict, "--predict")
    raw = read_csv(file)
    require_columns(raw, [sizecol, bwcol], option={sizecol: "--size", bwcol: "--busbw"}, path=file)
    cols = [sizecol, bwcol] + (["ranks"] if ranks is None and "ranks" in raw.columns else [])
    if ranks is None and "ranks" not in raw.columns:
        raise InputError(f"--ranks: required (the rank count of the sweep) unless {file} has a 'ranks' column; "
                         f"columns present: {', '.join(raw.columns)}")
    df, bad = numeric_columns(raw, cols)
    if df.empty:
        raise InputError(f"FILE: {file} has no usable rows ({bad.count} bad, first at line {bad.first_line})")
    bad_d = _report_bad(bad, file)
    if ranks is None:
        rs = np.unique(df["ranks"].to_numpy())
        if rs.size != 1:
            raise InputError(f"ranks column: the sweep mixes rank counts {sorted(rs.tolist())}; "
                             "filter to one or pass --ranks")
        ranks = int(rs[0])
    scale = 1e9 if busbw_unit == "GBps" else 1.0
    res = AlphaBeta(collective=collective, latency_scaling=latency_scaling).fit(
        df[sizecol].to_numpy(), df[bwcol].to_numpy() * scale, ranks=ranks)
    at = np.array(sizes) if sizes is not None else np.unique(df[sizecol].to_numpy())
    if np.any(at <= 0):
        raise InputError("--predict: sizes must be > 0")
    n_pred = predict_ranks or ranks
    pred = res.predict(at, n_pred, alpha=1 - level)
    out = {
        "alpha_s": res.alpha_s,
        "beta_bytes_per_s": res.beta_bytes_per_s,
        "conf_int": {k: list(v) for k, v in res.conf_int(1 - level).items() if k != "inv_bandwidth_s_per_byte"},
        "level": level,
        "collective": collective,
        "ranks": ranks,
        "predict_ranks": n_pred,
        "busbw_unit": busbw_unit,
        "predictions": [{"size": float(at[i]), "busbw": float(pred["busbw"][i]) / scale,
                         "time_s": float(pred["time_s"][i])} for i in range(at.size)],
        "n": res.n,
        "bad_rows": bad_d,
    }
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary(1 - level))
    click.echo(f"alpha {res.alpha_s:.4g} s, bus bandwidth {res.beta_bytes_per_s / 1e9:.4g} GB/s ({collective}, {ranks} ranks)")
    for p in out["predictions"]:
        click.echo(f"  {p['size']:.4g} B on {n_pred} ranks: busbw {p['busbw']:.4g} {busbw_unit}, {p['time_s']:.4g} s")


@fit.command("roofline")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--flops", "fcol", required=True, help="Column with FLOPs per call.")
@click.option("--bytes", "bcol", required=True, help="Column with bytes moved per call.")
@click.option("--seconds", "scol", required=True, help="Column with seconds per call.")
@click.option("--dtype", "dcol", default=None, help="Optional column naming the dtype (one compute ceiling each).")
@click.option("--level", "lcol", default=None, help="Optional column naming the memory level (one bandwidth ceiling each).")
@click.option("--method", type=click.Choice(["envelope", "lsq"]), default="envelope", show_default=True,
              help="envelope: max achieved (a proven lower bound on the ceiling); lsq: fit kernels built to hit the roof.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def roofline_cmd(file, fcol, bcol, scol, dcol, lcol, method, as_json) -> None:
    """Compute and memory ceilings from kernel measurements, and the ridge intensity."""
    import pandas as pd

    from hwmodels.csvio import BadRows, first_line, numeric_columns, read_csv, require_columns
    from hwmodels.roofline import Roofline

    raw = read_csv(file)
    opts = {fcol: "--flops", bcol: "--bytes", scol: "--seconds"}
    extra = [c for c in (dcol, lcol) if c]
    require_columns(raw, [fcol, bcol, scol, *extra], option={**opts, **({dcol: "--dtype"} if dcol else {}),
                                                             **({lcol: "--level"} if lcol else {})}, path=file)
    df, bad = numeric_columns(raw, [fcol, bcol, scol])
    import numpy as np

    blank = np.zeros(len(raw), dtype=bool)
    for c in extra:
        blank |= raw[c].astype(str).str.strip().eq("").to_numpy()
    keep = raw.index.isin(df.index) & ~blank
    badmask = ~keep
    idx = np.flatnonzero(badmask)
    bad = BadRows(int(idx.size), first_line(raw, idx), tuple([fcol, bcol, scol, *extra]))
    bad_d = _report_bad(bad, file)
    if not keep.any():
        raise InputError(f"FILE: {file} has no usable rows")
    data = pd.DataFrame({"flops": pd.to_numeric(raw.loc[keep, fcol]), "bytes": pd.to_numeric(raw.loc[keep, bcol]),
                         "seconds": pd.to_numeric(raw.loc[keep, scol])})
    if dcol:
        data["dtype"] = raw.loc[keep, dcol].astype(str).str.strip()
    if lcol:
        data["level"] = raw.loc[keep, lcol].astype(str).str.strip()
    res = Roofline(method=method).fit(data)
    out = {**res.to_dict(), "bad_rows": bad_d}
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary())
