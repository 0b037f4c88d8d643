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
@click.option("--errors", type=click.Choice(["auto", "additive", "multiplicative"]), default="additive", show_default=True,
              help="Noise model: constant absolute or constant relative error; auto: the likelier on the throughput scale.")
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
        "errors": res.errors,
        "noise": res.noise,
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
@click.option("--family", type=click.Choice(["auto", "power", "exp", "power0", "power_shift", "exp2", "exp_drift"]),
              default="auto", show_default=True)
@click.option("--select", type=click.Choice(["aicc", "average"]), default="average", show_default=True,
              help="Average families by leave-future-out skill with a structural error (calibrated), or the best by AICc.")
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
@click.option("--size", "sizecol", default=None, help="CSV: column with the message size in bytes (nccl-tests 'size'). "
              "Not needed for a raw nccl-tests log.")
@click.option("--busbw", "bwcol", default=None, help="CSV: column with the bus bandwidth (nccl-tests 'busbw').")
@click.option("--busbw-unit", type=click.Choice(["GBps", "Bps"]), default="GBps", show_default=True,
              help="Unit of the busbw column (nccl-tests prints GB/s, 1 GB = 1e9 B); predictions use it too.")
@click.option("--ranks", type=click.IntRange(min=2), default=None,
              help="Rank count of the sweep (default: the log's '# Rank' lines, or the CSV's 'ranks' column).")
@click.option("--collective", type=click.Choice(["all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                                  "broadcast", "reduce", "sendrecv"]), default=None,
              help="Sets the busbw factor (nccl-tests PERFORMANCE.md). Default: the log's, else all_reduce.")
@click.option("--model", "model", type=click.Choice(["auto", "ramp", "alpha-beta"]), default="auto", show_default=True,
              help="ramp: latency + pipelining ramp + saturation per NCCL regime (hwmodels.comms.CommsModel); "
                   "alpha-beta: t = alpha + F S / B. auto: ramp for a raw nccl-tests log, alpha-beta for a CSV.")
@click.option("--min-size", type=float, default=None, help="Fit only sizes >= this many bytes.")
@click.option("--max-size", type=float, default=None, help="Fit only sizes <= this many bytes.")
@click.option("--predict", "predict", default=None, help="Sizes in bytes to predict at, e.g. 1e6,1e8.")
@click.option("--predict-ranks", type=click.IntRange(min=2), default=None,
              help="Project the predictions to this rank count (latency scaled by --latency-scaling).")
@click.option("--latency-scaling", type=click.Choice(["ring", "tree", "constant"]), default="ring", show_default=True)
@click.option("--node", "node_id", default=None,
              help="Catalog node whose link figures project the ramp fit to --predict-ranks (intra-node NVLink vs "
                   "inter-node network; default: matched from a raw log's GPU names). Without it busbw is kept.")
@click.option("--level", type=float, default=0.95, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def comms_cmd(file, sizecol, bwcol, busbw_unit, ranks, collective, model, min_size, max_size, predict, predict_ranks,
              latency_scaling, node_id, level, as_json) -> None:
    """Fit a collective's time vs size: a busbw CSV or a raw nccl-tests log (any *_perf binary)."""
    import numpy as np

    from hweval.importers import nccl_tests as NT
    from hwmodels.comms import AlphaBeta, CommsModel

    _level(level)
    sizes = _floats(predict, "--predict")
    scale = 1e9 if busbw_unit == "GBps" else 1.0
    source: dict[str, Any] | None = None
    bad_d: dict[str, Any] = {"count": 0, "first_line": None}
    if (sizecol is None and bwcol is None) or NT.looks_like_nccl_tests(file):
        logs = NT.parse_file(file, collective=collective, ranks=ranks)
        if len(logs) > 1:
            click.echo(f"hweval: warning: {file} holds {len(logs)} tables; fitting the first "
                       f"({logs[0].collective}, {len(logs[0].rows)} rows)", err=True)
        log = logs[0]
        if log.ranks is None:
            raise InputError(f"--ranks: {file} has no '# Rank N ...' lines, so the rank count is unknown; pass --ranks")
        collective, ranks = log.collective, int(log.ranks)
        s_oop, t_oop, _ = log.arrays()
        _, t_ip, _ = log.arrays(inplace=True)
        keep = (s_oop > 0) & (t_oop > 0) & (t_ip > 0)
        size_arr, time_arr = s_oop[keep], t_oop[keep]
        rep_s, rep_t = np.r_[size_arr, size_arr], np.r_[time_arr, t_ip[keep]]  # in-place: a replicate
        source = {"path": log.source.path, "sha256": log.source.sha256, "format": "nccl-tests",
                  "collective": collective, "ranks": ranks, "devices": list(log.device_names),
                  "rows": len(log.rows), "rows_used": int(keep.sum())}
        model = "ramp" if model == "auto" else model
        node_id = node_id or NT.match_node_id(log)
    else:
        from hwmodels.csvio import first_line, numeric_columns, read_csv, require_columns

        if sizecol is None or bwcol is None:
            raise InputError("--size and --busbw: both are needed for a CSV (or give a raw nccl-tests log)")
        collective = collective or "all_reduce"
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
        from hwmodels.comms import busbw_factor

        bw = df[bwcol].to_numpy() * scale
        size_arr = df[sizecol].to_numpy().astype(float)
        nonpos = np.flatnonzero(size_arr <= 0)
        if nonpos.size:
            pos_rows = raw.index.get_indexer(df.index[nonpos])
            raise InputError(f"--size {sizecol!r}: message sizes must be > 0 bytes; {nonpos.size} row(s) are not "
                             f"(first at {file} line {first_line(raw, pos_rows)}: {size_arr[nonpos[0]]:g})")
        pos = bw > 0
        time_arr = busbw_factor(collective, ranks) * size_arr[pos] / bw[pos]
        size_arr = size_arr[pos]
        rep_s, rep_t = size_arr, time_arr
        model = "alpha-beta" if model == "auto" else model
    lo_b = min_size if min_size is not None else 0.0
    hi_b = max_size if max_size is not None else math.inf
    link_node = None
    if node_id is not None:
        from hwmodels.catalog import default_catalog
        from hwmodels.errors import ModelInputError

        try:
            link_node = default_catalog().get(node_id)
        except ModelInputError as exc:
            raise InputError(f"--{exc}") from None
    if model == "ramp":
        res = CommsModel(collective=collective, latency_scaling=latency_scaling, min_size_bytes=lo_b,
                         max_size_bytes=hi_b).fit(rep_s, time_s=rep_t, ranks=ranks, link=link_node)
    else:
        m = (size_arr >= lo_b) & (size_arr <= hi_b)
        res = AlphaBeta(collective=collective, latency_scaling=latency_scaling).fit(size_arr[m], time_s=time_arr[m],
                                                                                    ranks=ranks)
    at = np.array(sizes) if sizes is not None else np.unique(size_arr[(size_arr >= lo_b) & (size_arr <= hi_b)])
    if at.size == 0 or np.any(at <= 0):
        raise InputError("--predict: sizes must be > 0")
    n_pred = predict_ranks or ranks
    pred = res.predict(at, n_pred, alpha=1 - level)
    lo_key, hi_key = ("pred_lo", "pred_hi") if "pred_lo" in pred else ("time_lo", "time_hi")
    out: dict[str, Any] = {
        "model": model,
        "alpha_s": res.alpha_s,
        "level": level,
        "collective": collective,
        "ranks": ranks,
        "predict_ranks": n_pred,
        "busbw_unit": busbw_unit,
        "n": res.n,
        "bad_rows": bad_d,
    }
    if model == "ramp":
        out.update(fill_s=res.fill_s, busbw_inf_bytes_per_s=res.busbw_inf,
                   conf_int={k: list(v) for k, v in res.conf_int(1 - level).items()},
                   regimes=[r.to_dict() for r in res.regimes], switches_at_bytes=res.meta["switches_at_bytes"],
                   residual_sd_log_time=math.sqrt(res.s2_pred), link_node=node_id,
                   at_bound=res.meta.get("at_bound", []))
    else:
        out.update(beta_bytes_per_s=res.beta_bytes_per_s,
                   conf_int={k: list(v) for k, v in res.conf_int(1 - level).items() if k != "inv_bandwidth_s_per_byte"})
    f = float(pred["busbw"][0] * pred["time_s"][0] / at[0]) if at.size else 1.0
    out["predictions"] = [{"size": float(at[i]), "busbw": float(pred["busbw"][i]) / scale,
                           "busbw_lo": f * float(at[i]) / float(pred[hi_key][i]) / scale,
                           "busbw_hi": f * float(at[i]) / float(pred[lo_key][i]) / scale if pred[lo_key][i] > 0 else None,
                           "time_s": float(pred["time_s"][i]), "time_lo": float(pred[lo_key][i]),
                           "time_hi": float(pred[hi_key][i])} for i in range(at.size)]
    if source is not None:
        out["source"] = source
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary(1 - level))
    if model == "ramp":
        click.echo(f"asymptotic bus bandwidth {res.busbw_inf / 1e9:.4g} GB/s ({collective}, {ranks} ranks)")
    else:
        click.echo(f"alpha {res.alpha_s:.4g} s, bus bandwidth {res.beta_bytes_per_s / 1e9:.4g} GB/s ({collective}, {ranks} ranks)")
    for p in out["predictions"]:
        click.echo(f"  {p['size']:.4g} B on {n_pred} ranks: busbw {p['busbw']:.4g} {busbw_unit} "
                   f"[{p['busbw_lo']:.4g}, {p['busbw_hi'] if p['busbw_hi'] is not None else float('inf'):.4g}], "
                   f"{p['time_s']:.4g} s")


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
