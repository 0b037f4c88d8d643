"""``hweval catalog list|show ID|check``: the hardware catalog, its sources and the age of its prices.

* ``list``: one row per node type: accelerators per node, dense bf16 peak and
  memory per accelerator, and the price per accelerator-hour of every pricing
  mode with the date it was listed; ``*`` marks a price older than 12 months.
* ``show ID``: every field of one node type, each with its source.
* ``check``: validate every catalog file on its own (units, sources,
  with-sparsity = 2 x dense, derivations, topology, dates, file name = id);
  one line per bad file and exit code 2, or a summary and exit code 0.

``--catalog`` is a directory of ``*.toml`` files or one file (default
``data/catalog`` or ``$HWMODELS_CATALOG``); ``--prices FILE.csv`` applies a
buyer's quotes (:mod:`hwmodels.prices`) before listing or showing;
``--today YYYY-MM-DD`` fixes the date staleness is judged against.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import click

from hweval.commands.common import echo_json
from hweval.commands.fit import _model_errors
from hwcore.errors import InputError

catalog_option = click.option("--catalog", "catalog_path", type=click.Path(), default=None,
                              help="Catalog directory or TOML file (default: data/catalog).")
prices_option = click.option("--prices", "prices_path", type=click.Path(), default=None,
                             help="A buyer's quotes CSV (node, mode, usd_per_accelerator_hour, as_of, source) "
                                  "applied over the catalog prices.")
today_option = click.option("--today", "today", default=None, metavar="YYYY-MM-DD",
                            help="Judge staleness on this date (default: the system date).")


def _today(text: str | None) -> dt.date:
    if text is None:
        return dt.date.today()
    from hwmodels.catalog import parse_as_of
    from hwmodels.errors import ModelInputError

    try:
        return parse_as_of(text, "--today")
    except ModelInputError as exc:
        raise InputError(str(exc)) from None


def _load(catalog_path: str | None, prices_path: str | None, today: dt.date):
    from hwmodels.catalog import load_catalog
    from hwmodels.prices import apply_quotes, load_quotes

    cat = load_catalog(catalog_path)
    if prices_path:
        cat = apply_quotes(cat, load_quotes(prices_path, cat, today=today))
    return cat


def _fin(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _price_record(node, mode: str, today: dt.date) -> dict[str, Any]:
    p = node.pricing.get(mode)
    if p is None:
        return {"available": False, "reason": "not listed in the catalog file"}
    if not p.available:
        return {"available": False, "reason": p.source}
    rec: dict[str, Any] = {
        "available": True,
        "usd_per_accelerator_hour": _fin(node.price_per_accelerator_hour(mode)),
        "usd_per_node_hour": _fin(node.price_per_hour(mode)),
        "provider": p.provider, "instance": p.instance, "region": p.region, "term": p.term,
        "as_of": p.as_of, "age_months": None if p.age_months(today) is None else round(p.age_months(today), 1),
        "stale": p.stale(today), "source": p.source,
    }
    if mode == "on_prem":
        rec.update(provider="on-prem TCO", capex_usd=p.capex_usd, amortization_years=p.amortization_years,
                   utilization=p.utilization, pue=p.pue, usd_per_kwh=p.usd_per_kwh,
                   energy_usd_per_node_hour=node.energy_usd_per_hour(),
                   capex_source=p.capex_source, energy_source=p.energy_source)
    return rec


def _summary(node, today: dt.date) -> dict[str, Any]:
    from hwmodels.catalog import MODES

    bf16 = node.peaks.get("bf16")
    return {
        "id": node.id, "name": node.name, "kind": node.kind,
        "accelerators_per_node": node.accelerators_per_node, "scale_up_size": node.scale_up_size,
        "peak_dense_bf16_flops_per_s": bf16.dense_flops_per_s if bf16 else None,
        "memory_capacity_bytes": node.memory_capacity_bytes,
        "memory_bandwidth_bytes_per_s": node.memory_bandwidth_bytes_per_s,
        "prices": {m: _price_record(node, m, today) for m in MODES},
        "stale_prices": node.stale_prices(today),
    }


def _detail(node, today: dt.date) -> dict[str, Any]:
    d = _summary(node, today)
    d.update(
        notes=node.notes, file=node.path, match=node.match,
        accelerators={"per_node_count": node.accelerators_per_node, "source": node.sources.get("accelerators")},
        peaks={dt_: {"dense_flops_per_s": p.dense_flops_per_s, "sparse_flops_per_s": p.sparse_flops_per_s,
                     "source": p.source, "derivation": p.derivation} for dt_, p in node.peaks.items()},
        memory={"capacity_bytes": node.memory_capacity_bytes, "bandwidth_bytes_per_s": node.memory_bandwidth_bytes_per_s,
                "source": node.sources.get("memory")},
        links={"scale_up_size": node.scale_up_size, "intra_node_link": node.intra_node_link,
               "intra_node_topology": node.intra_node_topology,
               "intra_node_bytes_per_s_as_stated": node.intra_node_bytes_per_s,
               "intra_node_direction_as_stated": "bidirectional" if node.intra_node_bidirectional else "unidirectional",
               "intra_node_unidir_bytes_per_s": node.intra_node_unidir_bytes_per_s,
               "inter_node_bytes_per_s_per_node": node.inter_node_bytes_per_s,
               "inter_node_bytes_per_s_per_accelerator": node.inter_node_bytes_per_s_per_accelerator,
               "topology_declared": node.topology_declared, "source": node.sources.get("links")},
        power={"tdp_watts": node.tdp_watts, "node_watts": node.node_watts, "source": node.sources.get("power")},
    )
    return d


def _money(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:,.2f}" if x >= 0.1 else f"${x:.3f}"


def _gib(x: float | None) -> str:
    """Memory capacity in GiB: HBM is sized in binary units and devices report it so (catalog README)."""
    return "-" if x is None else f"{x / 2**30:,.4g} GiB"


def _si(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
        if abs(x) >= scale:
            return f"{x / scale:,.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


@click.group("catalog")
def catalog() -> None:
    """List, show and check the hardware catalog (node types, topology, dated prices, sources)."""


@catalog.command("list")
@catalog_option
@prices_option
@today_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_model_errors
def list_cmd(catalog_path, prices_path, today, as_json) -> None:
    """One row per node type with its dense bf16 peak, memory and dated price per accelerator-hour per mode."""
    from hwmodels.catalog import MODES, STALE_MONTHS

    t = _today(today)
    cat = _load(catalog_path, prices_path, t)
    rows = [_summary(n, t) for n in cat]
    if as_json:
        echo_json({"catalog": cat.path, "today": t.isoformat(), "stale_after_months": STALE_MONTHS,
                   "prices_file": prices_path, "nodes": rows})
        return
    modes = [m for m in MODES if any(r["prices"][m]["available"] for r in rows)]
    head = ["id", "acc/node", "bf16 dense/acc", "memory/acc"] + [f"{m} $/acc-h (as of)" for m in modes]
    table = [head]
    for r in rows:
        cells = [r["id"], str(r["accelerators_per_node"]), _si(r["peak_dense_bf16_flops_per_s"], "FLOP/s"),
                 _gib(r["memory_capacity_bytes"])]
        for m in modes:
            p = r["prices"][m]
            cells.append(f"{_money(p['usd_per_accelerator_hour'])} ({p['as_of']}){'*' if p['stale'] else ''}"
                         if p["available"] else "-")
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    n_stale = sum(1 for r in rows if r["stale_prices"])
    click.echo(f"* stale: listed more than {STALE_MONTHS:g} months before {t.isoformat()} "
               f"({n_stale} of {len(rows)} node types have at least one). '-': no public price "
               "(`hweval catalog show ID` says why). Prices: " + (f"buyer quotes from {prices_path} over " if prices_path
                                                                  else "") + f"catalog {cat.path}.")


@catalog.command("show")
@click.argument("node_id")
@catalog_option
@prices_option
@today_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_model_errors
def show_cmd(node_id, catalog_path, prices_path, today, as_json) -> None:
    """Every field of one node type, each with its source."""
    from hwmodels.catalog import MODES

    t = _today(today)
    node = _load(catalog_path, prices_path, t).get(node_id)
    d = _detail(node, t)
    if as_json:
        echo_json(d)
        return
    out = click.echo
    out(f"{node.id}: {node.name} ({node.kind}){'  [' + node.notes + ']' if node.notes else ''}")
    out(f"  file: {node.path}")
    out(f"  accelerators per node: {node.accelerators_per_node}")
    out(f"      source: {d['accelerators']['source']}")
    out("  peak per accelerator (dense | with 2:4 sparsity):")
    for name, p in d["peaks"].items():
        sp = _si(p["sparse_flops_per_s"], "FLOP/s") if p["sparse_flops_per_s"] else "-"
        out(f"    {name:5s} {_si(p['dense_flops_per_s'], 'FLOP/s'):>14s} | {sp}")
        out(f"      source: {p['source']}")
        if p["derivation"]:
            dv = p["derivation"]
            out(f"      derivation: {dv['units_count']:g} units x {dv['flops_per_clock_per_unit_count']:g} FLOP/clock x "
                f"{dv['clock_hz'] / 1e9:g} GHz = {_si(dv['flops_per_s'], 'FLOP/s')} ({dv['source']})")
    out(f"  memory per accelerator: {_gib(node.memory_capacity_bytes)}, {_si(node.memory_bandwidth_bytes_per_s, 'B/s')}")
    out(f"      source: {d['memory']['source']}")
    lk = d["links"]
    out(f"  scale-up: {lk['scale_up_size']} accelerators, {lk['intra_node_topology']}: {lk['intra_node_link']}")
    out(f"    intra-node per accelerator: {_si(lk['intra_node_bytes_per_s_as_stated'], 'B/s')} as stated "
        f"({lk['intra_node_direction_as_stated']}) = {_si(lk['intra_node_unidir_bytes_per_s'], 'B/s')} per direction")
    out(f"    inter-node: {_si(lk['inter_node_bytes_per_s_per_node'], 'B/s')} per node, "
        f"{_si(lk['inter_node_bytes_per_s_per_accelerator'], 'B/s')} per accelerator (one direction)")
    out(f"      source: {lk['source']}")
    out(f"  power: {node.tdp_watts:,.4g} W per accelerator, {node.node_watts:,.6g} W per node")
    out(f"      source: {d['power']['source']}")
    out(f"  prices (judged on {t.isoformat()}; * = older than 12 months):")
    for m in MODES:
        p = d["prices"][m]
        if not p["available"]:
            out(f"    {m}: not available: {p['reason']}")
            continue
        out(f"    {m}: {_money(p['usd_per_accelerator_hour'])} per accelerator-hour, "
            f"{_money(p['usd_per_node_hour'])} per node-hour, as of {p['as_of']} "
            f"({p['age_months']:g} months){' *stale*' if p['stale'] else ''}")
        if m == "on_prem":
            out(f"      capex ${p['capex_usd']:,.0f} over {p['amortization_years']:g} years at "
                f"{p['utilization']:.0%} utilization; energy {_money(p['energy_usd_per_node_hour'])}/node-hour "
                f"(PUE {p['pue']:g}, ${p['usd_per_kwh']:g}/kWh)")
            out(f"      assumptions: {p['source']}")
            out(f"      capex source: {p['capex_source']}")
            out(f"      energy source: {p['energy_source']}")
        else:
            out(f"      {p['provider']}, {p['instance']}, {p['region']}{', ' + p['term'] if p['term'] else ''}")
            out(f"      source: {p['source']}")


@catalog.command("check")
@catalog_option
@today_option
@click.pass_context
@_model_errors
def check_cmd(ctx, catalog_path, today) -> None:
    """Validate every catalog file: one line per bad file and exit 2, or a summary and exit 0."""
    from hwmodels.catalog import STALE_MONTHS, check_catalog

    t = _today(today)
    res = check_catalog(catalog_path, today=t)
    if not res.ok:
        for line in res.errors:
            click.echo(f"hweval: error: {line}", err=True)
        click.echo(f"hweval: catalog {res.path}: {len(res.errors)} of {len(res.files)} file(s) invalid", err=True)
        ctx.exit(2)
    stale = res.stale()
    n_prices = sum(len(n.modes) for n in res.nodes)
    n_stale = sum(len(v) for v in stale.values())
    ids = ", ".join(n.id for n in res.nodes)
    detail = "; ".join(k + ": " + ", ".join(v) for k, v in stale.items())
    click.echo(f"catalog {res.path}: {len(res.files)} file(s) valid ({ids}); units, sources, sparse = 2 x dense, "
               f"derivations, topology and dates checked. {n_stale} of {n_prices} prices are older than "
               f"{STALE_MONTHS:g} months on {t.isoformat()}" + (f" ({detail})" if stale else "") + ".")
