"""A buyer's own price quotes, read from a CSV and applied over the catalog.

Catalog prices are public list prices with a date (``as_of``) and a source;
a buyer negotiating a purchase has quotes of their own. This module reads them
and returns a catalog whose prices are those quotes, so every tool that prices
a job (``hweval cost``, ``hweval predict``, notebook 05, plans) can take
``--prices FILE.csv`` and price with them instead.

CSV format (one quote per row; header required; column order free)::

    node,mode,usd_per_accelerator_hour,as_of,source
    h100-sxm,on_demand,2.10,2026-11,Vendor X quote #1234 (512 GPUs, 12 months)
    h100-sxm,reserved,1.65,2026-11-20,Vendor X quote #1234, 1-year term
    tpu-v5p,reserved_3y,1.70,2026-10,Google Cloud account team

* ``node``: a catalog node id (``hweval catalog list``).
* ``mode``: a rented pricing mode, one of :data:`QUOTE_MODES`. ``on_prem`` is
  computed from capex, life, utilization and energy: quote a purchase by
  editing ``[pricing.on_prem.capex]`` in a copy of the catalog file instead.
* ``usd_per_accelerator_hour``: USD per accelerator (GPU, TPU chip, Gaudi
  card) per hour, finite and > 0. The node price is this times
  ``accelerators_per_node``.
* ``as_of``: the date of the quote, ``YYYY-MM`` or ``YYYY-MM-DD``, not in the
  future.
* ``source``: who quoted it (free text, required: every number needs a source).

Reading is strict: a missing or unknown column, a row with too few or too
many cells, an unknown node or mode, a price that is not a finite positive
number, a bad date, an empty source or the same (node, mode) twice is a
:class:`~hwmodels.errors.ModelInputError` naming the file, the row (data
rows count from 1; the file line is given too) and the column, with the valid
choices. Nothing is applied from a file with any bad row.
"""

from __future__ import annotations

import csv
import datetime as _dt
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

from hwmodels.catalog import RENT_MODES, RESERVED_MODES, Catalog, Price, default_catalog, parse_as_of
from hwmodels.errors import ModelInputError

COLUMNS = ("node", "mode", "usd_per_accelerator_hour", "as_of", "source")
QUOTE_MODES = RENT_MODES
PROVIDER = "buyer quote"


@dataclass(frozen=True, kw_only=True)
class Quote:
    """One buyer quote: USD per accelerator-hour for ``node`` under ``mode``, dated and sourced."""

    node: str
    mode: str
    usd_per_accelerator_hour: float
    as_of: str
    source: str
    file: str = ""
    row: int = 0

    @property
    def as_of_date(self) -> _dt.date:
        return parse_as_of(self.as_of)

    def where(self) -> str:
        return f"{self.file} row {self.row}" if self.file else "buyer quote"


def load_quotes(path: str | os.PathLike[str], catalog: Catalog | None = None, *,
                today: _dt.date | None = None) -> list[Quote]:
    """Read a buyer's quotes CSV (module docstring), validating every cell against ``catalog``.

    ``catalog`` defaults to :func:`hwmodels.catalog.default_catalog`; ``today``
    (default: the system date) bounds ``as_of`` from above.
    """
    p = Path(path)
    cat = catalog if catalog is not None else default_catalog()
    today = today or _dt.date.today()
    name = str(p)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ModelInputError(f"--prices: no such file {name!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelInputError(f"--prices: cannot read {name}: {exc}") from None
    rows = list(csv.reader(text.splitlines()))
    # skip blank lines but keep file line numbers
    numbered = [(i + 1, r) for i, r in enumerate(rows) if any(c.strip() for c in r)]
    if not numbered:
        raise ModelInputError(f"{name}: empty file; expected a header row with columns {', '.join(COLUMNS)}")
    header_line, header = numbered[0]
    header = [h.strip() for h in header]
    for col in COLUMNS:
        if col not in header:
            raise ModelInputError(f"{name}: missing column {col!r}; required columns: {', '.join(COLUMNS)} "
                                  f"(found: {', '.join(header) or 'none'})")
    extra = [h for h in header if h not in COLUMNS]
    if extra:
        raise ModelInputError(f"{name}: unknown column {extra[0]!r}; valid columns: {', '.join(COLUMNS)}")
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise ModelInputError(f"{name}: column {dup[0]!r} appears twice in the header")
    idx = {h: header.index(h) for h in COLUMNS}
    quotes: list[Quote] = []
    seen: dict[tuple[str, str], int] = {}
    for n, (line, cells) in enumerate(numbered[1:], start=1):
        at = f"{name}: row {n} (line {line})"
        if len(cells) != len(header):
            raise ModelInputError(f"{at}: {len(cells)} cells but the header has {len(header)} "
                                  f"({', '.join(header)}); quote cells that contain commas")
        val = {c: cells[i].strip() for c, i in idx.items()}
        node = val["node"]
        if node not in cat:
            raise ModelInputError(f"{at}, column 'node': unknown value {node!r}; valid choices: {', '.join(cat.ids())}")
        mode = val["mode"]
        if mode not in QUOTE_MODES:
            hint = (" (on_prem is computed from capex: edit [pricing.on_prem.capex] in a copy of the catalog file)"
                    if mode == "on_prem" else "")
            raise ModelInputError(f"{at}, column 'mode': unknown value {mode!r}; valid choices: "
                                  f"{', '.join(QUOTE_MODES)}{hint}")
        raw = val["usd_per_accelerator_hour"]
        try:
            usd = float(raw)
        except ValueError:
            usd = math.nan
            bad = f"not a number: {raw!r}"
        else:
            bad = f"must be a finite number > 0, got {raw!r}"
        if not math.isfinite(usd) or usd <= 0:
            raise ModelInputError(f"{at}, column 'usd_per_accelerator_hour': {bad}")
        try:
            d = parse_as_of(val["as_of"], "as_of")
        except ModelInputError as exc:
            raise ModelInputError(f"{at}, column 'as_of': {str(exc).split(': ', 1)[1]}") from None
        if d > today:
            raise ModelInputError(f"{at}, column 'as_of': {val['as_of']!r} is after today ({today.isoformat()})")
        if not val["source"]:
            raise ModelInputError(f"{at}, column 'source': empty; say who quoted the price (every number needs a source)")
        key = (node, mode)
        if key in seen:
            raise ModelInputError(f"{at}: {node} / {mode} is quoted twice (also row {seen[key]}); keep one")
        seen[key] = n
        quotes.append(Quote(node=node, mode=mode, usd_per_accelerator_hour=usd, as_of=val["as_of"],
                            source=val["source"], file=name, row=n))
    if not quotes:
        raise ModelInputError(f"{name}: no quotes (only a header)")
    return quotes


def quote_price(quote: Quote, accelerators_per_node: int) -> Price:
    """The catalog :class:`~hwmodels.catalog.Price` (per node-hour) a quote stands for."""
    return Price(
        quote.mode, True, f"{PROVIDER}: {quote.source} ({quote.where()})",
        usd_per_hour=quote.usd_per_accelerator_hour * accelerators_per_node,
        provider=PROVIDER,
        instance=f"{accelerators_per_node} accelerators x USD {quote.usd_per_accelerator_hour:g} per accelerator-hour",
        region="as quoted", as_of=quote.as_of,
        term=(f"as quoted ({quote.mode})" if quote.mode in RESERVED_MODES else None),
    )


def apply_quotes(catalog: Catalog, quotes: list[Quote], *, only_quotes: bool = False) -> Catalog:
    """A copy of ``catalog`` whose (node, mode) prices are the buyer's ``quotes`` (provider "buyer quote").

    Modes a quote does not cover keep their catalog price, unless
    ``only_quotes=True``: then every rented mode without a quote becomes
    unavailable ("no buyer quote"), so a ranking uses the buyer's prices only
    (on-prem TCO is kept: it is computed from the catalog's capex inputs).
    The input catalog is not modified.
    """
    by_node: dict[str, list[Quote]] = {}
    for q in quotes:
        if q.node not in catalog:
            raise ModelInputError(f"{q.where()}: node {q.node!r} is not in the catalog; valid choices: "
                                  f"{', '.join(catalog.ids())}")
        if q.mode not in QUOTE_MODES:
            raise ModelInputError(f"{q.where()}: mode {q.mode!r}; valid choices: {', '.join(QUOTE_MODES)}")
        by_node.setdefault(q.node, []).append(q)
    out = catalog
    for node in catalog:
        qs = by_node.get(node.id, [])
        if not qs and not only_quotes:
            continue
        pricing = dict(node.pricing)
        sources = dict(node.sources)
        if only_quotes:
            for m in QUOTE_MODES:
                pricing.pop(m, None)
                sources.pop(f"pricing.{m}", None)
            for m in ("on_demand", "reserved", "spot"):  # the modes a catalog node always lists
                pricing[m] = Price(m, False, "no buyer quote for this node and mode (--prices, only quotes)")
                sources[f"pricing.{m}"] = pricing[m].source
        for q in qs:
            pricing[q.mode] = quote_price(q, node.accelerators_per_node)
            sources[f"pricing.{q.mode}"] = pricing[q.mode].source
        out = out.with_node(replace(node, pricing=pricing, sources=sources))
    return out
