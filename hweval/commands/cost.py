"""``hweval cost``: what a declared training job costs on each catalog node, or cost per convergence.

``--plan PLAN.yaml`` (the procurement answer): the plan's ``job:`` section
priced on every candidate node x accelerator count x pricing mode by
:func:`hweval.analysis.analyze` -- the same call the report and notebook 05
make, so the three agree; ``--prices FILE.csv`` applies a buyer's quotes,
``--catalog DIR`` another catalog, ``--today`` the date prices are judged
stale against.

``--workload-results`` (measured throughput -> cost per convergence):

``--workload-results`` is a CSV (format in :mod:`hwmodels.cost`: columns
``node``, optional ``nodes``, ``samples_per_s`` and/or ``time_to_target_s``,
optional loss curve ``samples`` + ``loss``) or a run id in the store, whose
``kind="workload"`` records supply ``metrics.samples_per_s``,
``metrics.time_to_target_s`` and ``metrics.loss_curve`` and whose node type is
``params.catalog_node`` / ``params.node`` (or the same keys in metrics), a
record ``node_id`` that is a catalog id, or the catalog entry matching the
record's fingerprint when the run's device is of that entry's kind
(:func:`hwmodels.catalog.record_node`: a CPU run on a GPU host is not priced
as the GPU node).

``--target``: ``loss=Y`` (or a bare number): fit the loss curve and cost the
samples needed to reach loss Y; ``samples=N``: a fixed amount of work; omitted:
use the measured ``time_to_target_s``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import click

from hweval.commands.common import echo_json, open_store, store_option
from hweval.commands.fit import _model_errors
from hwcore.errors import InputError

MODES = ("on_demand", "reserved", "spot", "on_prem")
THROUGHPUT_KEYS = ("samples_per_s", "throughput_samples_per_s", "samples_per_sec")
X_KEYS = ("samples", "x")  # samples seen; "step" is converted with params.batch_size
LOSS_KEYS = ("loss", "eval_loss", "value")


def _parse_target(text: str | None) -> tuple[str | None, float | None]:
    if text is None:
        return None, None
    kind, sep, val = text.partition("=")
    if not sep:
        kind, val = "loss", text
    kind = kind.strip()
    if kind not in ("loss", "samples"):
        raise InputError(f"--target: unknown kind {kind!r}; valid choices: loss=Y, samples=N (or a bare loss value)")
    try:
        v = float(val)
    except ValueError:
        raise InputError(f"--target: {val!r} is not a number") from None
    if not math.isfinite(v) or (kind == "samples" and v <= 0):
        raise InputError(f"--target: {text!r} must be a finite number (samples > 0)")
    return kind, v


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _curve_points(curve: Any, batch_size: float | None = None) -> list[tuple[float, float]] | None:
    """Loss-curve points (samples seen, loss) from the shapes a workload record may hold; None if malformed.

    Accepts a list of dicts (``samples`` or ``x``, or ``step`` x ``batch_size``;
    ``loss``/``eval_loss``/``value``), a dict of lists, or ``[x, loss]`` pairs.
    Token counts are not used as x: throughput is in samples/s.
    """
    pts = []
    if isinstance(curve, dict):
        keys = X_KEYS + (("step",) if batch_size else ())
        xk = next((k for k in keys if k in curve), None)
        lk = next((k for k in LOSS_KEYS if k in curve), None)
        if xk is None or lk is None or not isinstance(curve[xk], list) or not isinstance(curve[lk], list):
            return None
        curve = [{xk: a, "loss": b} for a, b in zip(curve[xk], curve[lk])]
    if not isinstance(curve, list):
        return None
    for p in curve:
        if isinstance(p, dict):
            xk = next((k for k in X_KEYS if k in p and _num(p[k]) is not None), None)
            lk = next((k for k in LOSS_KEYS if k in p and _num(p[k]) is not None), None)
            if xk is None and batch_size and _num(p.get("step")) is not None:
                x = _num(p["step"]) * batch_size
            elif xk is not None:
                x = _num(p[xk])
            else:
                return None
            if lk is None:
                return None
            y = _num(p[lk])
        elif isinstance(p, list | tuple) and len(p) >= 2:
            x, y = _num(p[0]), _num(p[1])
        else:
            return None
        if x is None or y is None or x <= 0:
            return None
        pts.append((x, y))
    return pts


def _from_store(run_id: str, store_path: str | None, catalog):
    """Workloads and pooled loss curve from the store's workload records of ``run_id``."""
    from hwmodels.catalog import record_node
    from hwmodels.cost import WorkloadInput

    store = open_store(store_path, write=False)
    df = store.query("select * from results where run_id = ? and kind = 'workload' order by finished_at", [run_id])
    if df.empty:
        raise InputError(f"--workload-results: no file named {run_id!r} and no workload records with run id "
                         f"{run_id!r} in store {store.path}")
    groups: dict[tuple[str, int], dict[str, list[float]]] = {}
    xs, ys = [], []
    bad, first, notes = 0, None, []
    for i, row in enumerate(df.itertuples(index=False)):
        def fail(why: str) -> None:
            nonlocal bad, first
            bad += 1
            first = first if first is not None else i + 1
            notes.append(f"record {row.record_id}: {why}")

        if row.status != "ok":
            notes.append(f"record {row.record_id}: status {row.status}, not used")
            continue
        try:
            metrics = json.loads(row.metrics) if isinstance(row.metrics, str) else (row.metrics or {})
            params = json.loads(row.params) if isinstance(row.params, str) else (row.params or {})
            fp = json.loads(row.fingerprint) if isinstance(row.fingerprint, str) else (row.fingerprint or {})
        except (TypeError, ValueError):
            fail("metrics/params/fingerprint are not valid JSON")
            continue
        if not isinstance(metrics, dict) or not isinstance(params, dict):
            fail("metrics/params are not JSON objects")
            continue
        # a catalog id in params (then metrics) wins; else the node the fingerprint matches, when the run's
        # device is of that node's kind (a CPU run on a GPU host measured the host, not the GPU node)
        named = next(({"catalog_node": d[k]} for d in (params, metrics) for k in ("catalog_node", "node")
                      if d.get(k)), {})
        device = str(metrics.get("device") or params.get("device") or "cpu")
        node = record_node(params=named, fingerprint=fp if isinstance(fp, dict) else {}, node_id=row.node_id,
                           device=device, catalog=catalog)
        nid = node.id if node is not None else None
        if nid is None:
            fail(f"no catalog node (params.catalog_node) and the fingerprint matches no catalog entry of the "
                 f"run's device kind ({device})")
            continue
        nodes = _num(params.get("nodes")) or 1
        thr = next((_num(metrics[k]) for k in THROUGHPUT_KEYS if _num(metrics.get(k)) is not None), None)
        tt = _num(metrics.get("time_to_target_s"))
        curve = metrics.get("loss_curve")
        batch = _num(params.get("batch_size")) or _num(metrics.get("batch_size"))
        pts = _curve_points(curve, batch) if curve else []
        if pts is None:
            fail("metrics.loss_curve is malformed (needs samples or step with params.batch_size, and loss)")
            pts = []
        if thr is None and tt is None and not pts:
            fail("no samples_per_s, time_to_target_s or loss_curve in metrics")
            continue
        g = groups.setdefault((nid, int(nodes)), {"samples_per_s": [], "time_to_target_s": []})
        if thr is not None and thr > 0:
            g["samples_per_s"].append(thr)
        if tt is not None and tt > 0:
            g["time_to_target_s"].append(tt)
        for x, y in pts:
            xs.append(x)
            ys.append(y)
    from hwmodels.csvio import BadRows

    workloads = [WorkloadInput(node=n, nodes=k, **{c: tuple(v) for c, v in g.items()})
                 for (n, k), g in groups.items() if g["samples_per_s"] or g["time_to_target_s"]]
    curve = (xs, ys) if xs else None
    return workloads, curve, BadRows(bad, first, ("metrics",)), notes


def _plan_answer(plan_path: str, catalog_path: str | None, prices: str | None, today: str | None,
                 candidates: str | None, store_path: str | None, as_json: bool) -> None:
    from hweval import analysis as A
    from hweval.plan import load_plan

    plan = load_plan(plan_path)
    if plan.job is None:
        raise InputError(f"--plan: {plan_path} declares no job (add a 'job:' section: model, tokens or target_loss, "
                         "accelerators or deadline_days, pricing)")
    cands = [c.strip() for c in candidates.split(",") if c.strip()] if candidates else \
        (plan.report.params.get("candidates") if plan.report is not None else None) or None
    prices = prices or ((plan.report.params.get("prices_csv") or None) if plan.report is not None else None)
    cat = A.load_catalog(catalog_path, None)
    for c in cands or []:
        if c not in cat:
            raise InputError(f"--candidates: unknown node {c!r}; valid choices: {', '.join(sorted(cat.ids()))}")
    an = A.analyze(store=open_store(store_path, write=False), plan=plan.name, job=plan.job, catalog_dir=catalog_path,
                   prices=prices, candidates=cands, today=today)
    if as_json:
        echo_json(an.to_dict())
        return
    click.echo(an.summary())
    for u in an.unavailable:
        click.echo(f"not available: {u.node}{f' x {u.accelerators}' if u.accelerators else ''}"
                   f"{f' ({u.pricing})' if u.pricing else ''}: {u.reason}", err=True)


@click.command()
@click.option("--plan", "plan_path", type=click.Path(dir_okay=False), default=None,
              help="Plan whose declared job is priced (the report's numbers).")
@click.option("--prices", "prices", type=click.Path(dir_okay=False), default=None,
              help="A buyer's quotes CSV (node, mode, usd_per_accelerator_hour, as_of, source).")
@click.option("--today", default=None, help="Date prices are judged stale against, YYYY-MM-DD (default: today).")
@click.option("--candidates", default=None, help="Comma-separated catalog node ids (with --plan; default: the plan's).")
@click.option("--catalog", "catalog_path", type=click.Path(), default=None,
              help="Catalog TOML file or directory (default: data/catalog).")
@click.option("--workload-results", "results", default=None,
              help="Workload-results CSV, or a run id of workload records in the store.")
@click.option("--target", default=None, help="loss=Y (fit the loss curve), samples=N (fixed work), or omit to use time_to_target_s.")
@click.option("--pricing", "modes", multiple=True, type=click.Choice(MODES), help="Pricing modes (repeatable; default all).")
@click.option("--level", type=float, default=0.9, show_default=True, help="Interval level.")
@click.option("--draws", type=click.IntRange(min=100), default=4000, show_default=True, help="Monte Carlo draws.")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@_model_errors
def cost(plan_path, prices, today, candidates, catalog_path, results, target, modes, level, draws, store_path,
         as_json) -> None:
    """Price a plan's declared job on every catalog node (--plan), or rank node types by measured cost to a target."""
    import numpy as np

    from hweval.analysis import load_catalog
    from hwmodels.convergence import Convergence
    from hwmodels.cost import CostModel, read_workload_csv

    if (plan_path is None) == (results is None):
        raise InputError("give exactly one of --plan (price the plan's declared job) or --workload-results")
    if plan_path is not None:
        _plan_answer(plan_path, catalog_path, prices, today, candidates, store_path, as_json)
        return
    if not 0 < level < 1:
        raise InputError(f"--level must be in (0, 1), got {level}")
    kind, value = _parse_target(target)
    cat = load_catalog(catalog_path, prices)
    notes: list[str] = []
    if os.path.isfile(results):
        workloads, curve, bad = read_workload_csv(results)
        source = results
    elif os.path.sep in results or results.endswith(".csv"):
        raise InputError(f"--workload-results: no such file {results!r}")
    else:
        workloads, curve, bad, notes = _from_store(results, store_path, cat)
        source = f"run {results}"
    if bad.count:
        click.echo(f"hweval: warning: {source}: skipped {bad.count} row(s) with missing or non-numeric values "
                   f"(first at line/record {bad.first_line})", err=True)
    for w in workloads:
        cat.get(w.node)  # unknown node -> error listing valid ids
    if not workloads:
        raise InputError(f"--workload-results: {source} has no usable throughput or time_to_target_s rows")
    model = CostModel(catalog=cat, modes=tuple(modes) or None, level=level, n_draws=draws)
    conv = None
    if kind == "loss":
        if curve is None:
            raise InputError(f"--target loss={value:g}: {source} has no loss curve (columns 'samples' and 'loss')")
        conv = Convergence().fit(np.asarray(curve[0], float), np.asarray(curve[1], float))
        res = model.fit(workloads, convergence=conv, target=value)
    elif kind == "samples":
        res = model.fit(workloads, work=value)
    else:
        missing = [w.node for w in workloads if not w.time_to_target_s]
        if missing:
            raise InputError(f"--target: required for {', '.join(missing)} (no time_to_target_s); "
                             "give loss=Y with a loss curve, or samples=N")
        res = model.fit(workloads)
    out = res.to_dict()
    for n in notes + list(res.notes):
        click.echo(f"hweval: note: {n}", err=True)
    out.update(source=source, target=target, bad_rows=bad.to_dict(), notes=notes + list(res.notes))
    if conv is not None:
        out["convergence"] = {"model": conv.model, "params": conv.params}
    if as_json:
        echo_json(out)
        return
    click.echo(res.summary())
    for b in out["break_even"]:
        click.echo(f"break-even {b['node']} buy vs {b['rent_mode']}: utilization {b['break_even_utilization']:.1%}")
    if out["sensitivity"]:
        top = out["sensitivity"][0]
        click.echo(f"most sensitive input for {res.rows[0]['node']}/{res.rows[0]['pricing']}: {top['input']} "
                   f"(cost {top['cost_at_low']:.4g} .. {top['cost_at_high']:.4g} USD)")
