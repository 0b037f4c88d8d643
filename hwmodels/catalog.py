"""Hardware catalog: node types as data, with a source for every number.

Each ``data/catalog/<id>.toml`` describes one node type (a whole machine that
is bought or rented as a unit). Field names carry their unit
(``dense_tflops``, ``bandwidth_TBps``, ``capacity_GiB``, ``usd_per_hour``,
``node_watts``...; see :mod:`hwmodels.units`); values are converted to SI once,
on load. Unknown or missing keys are errors naming the dotted field. Every
table that holds numbers carries a non-empty ``source`` string.

Schema (per-accelerator figures unless the name says ``node``)::

    id, name, kind = "cpu"|"gpu"|"tpu"|"accelerator", notes (optional),
    software_stack (optional: one of STACKS, the vendor software the node trains with; the
                            predictor carries a factor per stack fitted on the published runs of
                            the stack's other hardware, hwmodels.predict.predictor.stack_factor)
    [accelerators]          per_node_count, matrix_unit_dim (optional: the width of a systolic-array matrix unit,
                              e.g. a TPU MXU's 128 or 256; an operand dimension below it fills that share of
                              the array, hwmodels.predict.calibration ATTENTION_HEAD_DIM), source
    [die]                   (optional) same_as (the catalog id of a node built on the same accelerator die:
                              same SMs / cores and tensor units; memory, power or packaging may differ),
                              source. A kernel figure published for one carries to the other at the same
                              fraction of datasheet peak where the node has none of its own
                              (hwmodels.predict.calibration, "same-die figures")
    [match]                 (optional) cpu_model_contains=[..], cpu_flags_all=[..],
                            cores_max, gpu_name_contains=[..]
    [peak.<dtype>]          dense_tflops|dense_gflops|dense_pflops  (required: the DENSE figure)
                            sparse_<unit> (optional: the datasheet "with sparsity" figure), source
    [peak.<dtype>.derivation] (optional) units_count, flops_per_clock_per_unit_count, clock_GHz, source
    [memory]                capacity_GB|capacity_GiB, bandwidth_TBps|bandwidth_GBps, source
    [links]                 intra_node_GBps|TBps|Gbps (per accelerator, as the datasheet states it),
                            intra_node_direction = "bidirectional"|"unidirectional" (how the datasheet
                              figure counts: NVIDIA's "900 GB/s NVLink" is both directions summed),
                            intra_node_link (e.g. "NVLink4 via NVSwitch"),
                            intra_node_topology (one of TOPOLOGIES), scale_up_size (accelerators
                              in one high-bandwidth domain: 8 for an HGX board, 256 for a TPU v5e pod),
                            inter_node_GBps|inter_node_Gbps (per node, one direction, the scale-out
                              network beyond the scale-up domain), source
    [power]                 tdp_watts (per accelerator), node_watts (whole node, max), source
    [pricing.<mode>]        mode in on_demand, reserved, reserved_3y, spot: usd_per_hour (whole node),
                            provider, instance, region, as_of (YYYY-MM or YYYY-MM-DD: the date the
                            price was listed), term (reserved modes only), source
                            or: available = false, source = "why not"
                            (reserved_3y is optional; the other modes must each be given)
    [pricing.on_prem]       amortization_years, utilization_fraction, as_of, source
    [pricing.on_prem.capex]  node_usd, source
    [pricing.on_prem.energy] pue_ratio, usd_per_kWh, source

Dense vs sparse (the mistake this guards against is a viewer listing the
with-sparsity FP16 number under "dense"): only ``dense_*`` keys are ever
returned as dense peaks; ``sparse_*`` must be exactly twice the dense figure
(2:4 structured sparsity doubles tensor-core math rate: NVIDIA A100 Tensor Core
GPU Architecture whitepaper, 2020, "Fine-grained structured sparsity"; AMD
CDNA3 whitepaper, 2023); and where a ``derivation`` (units x FLOP/clock/unit x
clock) is given the dense figure must match it within 3%, so a sparse figure
pasted as dense fails by a factor of two.

Topology (the two link levels a collective can cross): ``intra_node_*`` is
the scale-up fabric joining ``scale_up_size`` accelerators (NVLink/NVSwitch,
Infinity Fabric, Gaudi's on-chip RoCE all-to-all, TPU ICI, PCIe); derived on
load are ``intra_node_unidir_bytes_per_s`` (per accelerator, one direction:
the datasheet figure halved when it is stated bidirectionally) and
``inter_node_bytes_per_s_per_accelerator`` (the per-node scale-out figure, one
direction, divided by ``accelerators_per_node``). For TPUs the priced node is
one host but the ICI domain spans the whole slice, so ``scale_up_size`` is
larger than ``accelerators_per_node`` and "inter-node" means the data-centre
network (DCN) beyond the slice.

Prices are dated: ``as_of`` is parsed (:func:`parse_as_of`);
:meth:`Price.age_months` and :meth:`Price.stale` (older than
``STALE_MONTHS`` = 12 months) let reports flag old prices. A buyer's own
quotes replace catalog prices through :mod:`hwmodels.prices`
(``load_quotes`` / ``apply_quotes``). :func:`check_catalog` validates every
file on its own (also: file name = id, no price dated in the future) for
``hweval catalog check``.

On-prem hourly price (Barroso, Hölzle & Ranganathan, *The Datacenter as a
Computer*, 3rd ed., 2018, ch. 6 "Modeling costs": capital cost amortized over
its life plus operating energy)::

    usd_per_hour = capex / (amortization_years * 8766 h * utilization)
                 + node_watts / 1000 * PUE * usd_per_kWh
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwmodels.dtypes import PEAK_DTYPES
from hwmodels.errors import ModelInputError, choices_error
from hwmodels.units import HOURS_PER_YEAR, to_si

DTYPES = PEAK_DTYPES  # the precisions a node entry gives peak throughput for (hwmodels.dtypes)
KINDS = ("cpu", "gpu", "tpu", "accelerator")
RENT_MODES = ("on_demand", "reserved", "reserved_3y", "spot")
MODES = RENT_MODES + ("on_prem",)
REQUIRED_MODES = ("on_demand", "reserved", "spot", "on_prem")  # reserved_3y may be omitted
RESERVED_MODES = ("reserved", "reserved_3y")
TOPOLOGIES = ("switch", "mesh", "ring", "torus2d", "torus3d", "pcie", "none")
DIRECTIONS = ("bidirectional", "unidirectional")
#: Vendor software stacks (compiler, kernel libraries, collective library) a node trains with: hardware of one
#: stack shares what no op model accounts for (benchmarks/predictor_validation.py, stack factor).
STACKS = ("cuda", "rocm", "xla-tpu", "synapseai", "neuron", "cpu")
STALE_MONTHS = 12.0
DAYS_PER_MONTH = 365.25 / 12  # mean Gregorian-ish month, for ages in months
SPARSITY_FACTOR = 2.0  # 2:4 structured sparsity, see module docstring
SPARSITY_TOL = 0.02
DERIVATION_TOL = 0.03


_AS_OF = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")


def parse_as_of(text: object, field: str = "as_of") -> _dt.date:
    """``"2025-06"`` or ``"2025-06-05"`` -> a date (YYYY-MM reads as the 1st); anything else is an error."""
    if isinstance(text, _dt.date):
        return text
    m = _AS_OF.match(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ModelInputError(f"{field}: expected a date YYYY-MM or YYYY-MM-DD, got {text!r}")
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)
    try:
        out = _dt.date(y, mo, d)
    except ValueError as exc:
        raise ModelInputError(f"{field}: {text!r} is not a calendar date ({exc})") from None
    if y < 2000:
        raise ModelInputError(f"{field}: {text!r} is before 2000; is the year right?")
    return out


def _today(today: _dt.date | str | None) -> _dt.date:
    if today is None:
        return _dt.date.today()
    return parse_as_of(today, "today")


def default_dir() -> Path:
    env = os.environ.get("HWMODELS_CATALOG")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "data" / "catalog"


@dataclass(frozen=True)
class Peak:
    dtype: str
    dense_flops_per_s: float
    sparse_flops_per_s: float | None
    source: str
    derivation: dict[str, Any] | None = None  # units_count, flops_per_clock_per_unit_count, clock_hz, source


def term_hours(term: str | None) -> float:
    """Minimum billed hours of a reservation term: "1-year committed use" -> 8766 h, "a 1-182 day
    reservation" -> 24 h; 0 for no term. A committed term is billed in full even when the job is shorter."""
    if not term:
        return 0.0
    m = re.search(r"(\d+)\s*-\s*\d+\s*day", term)  # a day range first: "1-182 day (not a 1-year plan)"
    if m:
        return int(m.group(1)) * 24.0
    m = re.search(r"(\d+)-year", term)
    if m:
        return int(m.group(1)) * 8766.0  # hours per year (hwmodels.units.HOURS_PER_YEAR: 365.25 x 24)
    return 0.0


@dataclass(frozen=True)
class Price:
    mode: str
    available: bool
    source: str
    usd_per_hour: float | None = None
    provider: str | None = None
    instance: str | None = None
    region: str | None = None
    as_of: str | None = None
    term: str | None = None
    # on_prem
    capex_usd: float | None = None
    amortization_years: float | None = None
    utilization: float | None = None
    pue: float | None = None
    usd_per_kwh: float | None = None
    capex_source: str | None = None
    energy_source: str | None = None

    @property
    def date(self) -> str | None:
        """Former name of :attr:`as_of` (kept for callers written before the rename)."""
        return self.as_of

    @property
    def min_billed_hours(self) -> float:
        """Hours per accelerator a committed term bills even when the job is shorter (:func:`term_hours`)."""
        return term_hours(self.term)

    @property
    def as_of_date(self) -> _dt.date | None:
        """``as_of`` as a date (YYYY-MM is read as the 1st of that month: the oldest it can be)."""
        return parse_as_of(self.as_of) if self.as_of else None

    def age_months(self, today: _dt.date | str | None = None) -> float | None:
        """Months from ``as_of`` to ``today`` (default: the system date); None when undated or unavailable."""
        d = self.as_of_date
        if d is None:
            return None
        t = _today(today)
        return (t - d).days / DAYS_PER_MONTH

    def stale(self, today: _dt.date | str | None = None) -> bool:
        """True when the price is older than ``STALE_MONTHS`` (12) months, or has no date at all."""
        if not self.available:
            return False
        age = self.age_months(today)
        return age is None or age > STALE_MONTHS


@dataclass(frozen=True)
class NodeType:
    """One node type; every figure in SI (flop/s, B, B/s, W, USD/h)."""

    id: str
    name: str
    kind: str
    accelerators_per_node: int
    peaks: dict[str, Peak]
    memory_capacity_bytes: float
    memory_bandwidth_bytes_per_s: float
    intra_node_bytes_per_s: float
    inter_node_bytes_per_s: float
    tdp_watts: float
    node_watts: float
    pricing: dict[str, Price]
    sources: dict[str, str]
    match: dict[str, Any] = field(default_factory=dict)
    notes: str = ""
    path: str = ""
    # topology (module docstring); defaults describe an undeclared single-level node
    scale_up_size: int = 1
    intra_node_link: str = ""
    intra_node_topology: str = "none"
    intra_node_bidirectional: bool = True
    intra_node_unidir_bytes_per_s: float = 0.0
    inter_node_bytes_per_s_per_accelerator: float = 0.0
    topology_declared: bool = False
    software_stack: str = ""
    same_die_as: str = ""  # [die] same_as: the catalog id of a node on the same accelerator die
    matrix_unit_dim: int = 0  # [accelerators] matrix_unit_dim: systolic-array width of the matrix unit (0: not one)

    def peak_flops_per_s(self, dtype: str, sparse: bool = False, *, per: str = "node") -> float:
        """Datasheet peak for ``dtype``; dense unless ``sparse=True`` (never a sparse figure as dense).

        ``per="node"`` (default: the unit that is priced) is the accelerator
        figure x ``accelerators_per_node``; ``per="accelerator"`` one device.
        """
        if dtype not in self.peaks:
            raise choices_error(f"{self.id}.peak", dtype, self.peaks)
        p = self.peaks[dtype]
        if sparse:
            if p.sparse_flops_per_s is None:
                raise ModelInputError(f"{self.id}.peak.{dtype}: no with-sparsity figure in the catalog")
            v = p.sparse_flops_per_s
        else:
            v = p.dense_flops_per_s
        if per == "node":
            return v * self.accelerators_per_node
        if per != "accelerator":
            raise choices_error("per", per, ("accelerator", "node"))
        return v

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(m for m in MODES if m in self.pricing and self.pricing[m].available)

    def price(self, mode: str) -> Price:
        if mode not in MODES:
            raise choices_error("pricing", mode, MODES)
        p = self.pricing.get(mode)
        if p is None or not p.available:
            why = f" ({p.source})" if p is not None else ""
            raise ModelInputError(
                f"{self.id}.pricing.{mode}: not available{why}; available modes: {', '.join(self.modes) or '(none)'}"
            )
        return p

    def price_per_hour(self, mode: str, **overrides: float) -> float:
        """USD per node-hour for ``mode``; on_prem per the module formula.

        ``overrides`` replace catalog inputs (``usd_per_hour``; on_prem:
        ``capex_usd``, ``amortization_years``, ``utilization``, ``pue``,
        ``usd_per_kwh``, ``node_watts``) for sensitivity studies.
        """
        p = self.price(mode)
        allowed = {"usd_per_hour"} if mode != "on_prem" else {
            "capex_usd", "amortization_years", "utilization", "pue", "usd_per_kwh", "node_watts"}
        for k in overrides:
            if k not in allowed:
                raise choices_error(f"price_per_hour({mode}) override", k, allowed)
        if mode != "on_prem":
            return float(overrides.get("usd_per_hour", p.usd_per_hour))
        capex = overrides.get("capex_usd", p.capex_usd)
        years = overrides.get("amortization_years", p.amortization_years)
        util = overrides.get("utilization", p.utilization)
        if not util or util <= 0:
            return math.inf
        return capex / (years * HOURS_PER_YEAR * util) + self.energy_usd_per_hour(**{
            k: overrides[k] for k in ("pue", "usd_per_kwh", "node_watts") if k in overrides})

    def price_per_accelerator_hour(self, mode: str, **overrides: float) -> float:
        """USD per accelerator-hour: :meth:`price_per_hour` / ``accelerators_per_node``."""
        return self.price_per_hour(mode, **overrides) / self.accelerators_per_node

    def stale_prices(self, today: _dt.date | str | None = None) -> list[str]:
        """Available modes whose price is older than 12 months (or undated)."""
        return [m for m in self.modes if self.pricing[m].stale(today)]

    def energy_usd_per_hour(self, *, pue: float | None = None, usd_per_kwh: float | None = None,
                            node_watts: float | None = None) -> float:
        """Facility energy cost of one node-hour at full draw: W/1000 x PUE x $/kWh (on_prem inputs)."""
        p = self.pricing.get("on_prem")
        pue = pue if pue is not None else (p.pue if p and p.available else None)
        usd = usd_per_kwh if usd_per_kwh is not None else (p.usd_per_kwh if p and p.available else None)
        if pue is None or usd is None:
            raise ModelInputError(f"{self.id}.pricing.on_prem.energy: no PUE / $/kWh in the catalog")
        return (node_watts if node_watts is not None else self.node_watts) / 1000.0 * pue * usd

    def pue(self) -> float:
        p = self.pricing.get("on_prem")
        return p.pue if p is not None and p.available and p.pue else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "name": self.name, "kind": self.kind, "software_stack": self.software_stack,
            "same_die_as": self.same_die_as, "matrix_unit_dim": self.matrix_unit_dim,
            "accelerators_per_node": self.accelerators_per_node,
            "peak_dense_flops_per_s": {d: p.dense_flops_per_s for d, p in self.peaks.items()},
            "peak_sparse_flops_per_s": {d: p.sparse_flops_per_s for d, p in self.peaks.items() if p.sparse_flops_per_s},
            "memory_capacity_bytes": self.memory_capacity_bytes,
            "memory_bandwidth_bytes_per_s": self.memory_bandwidth_bytes_per_s,
            "intra_node_bytes_per_s": self.intra_node_bytes_per_s,
            "inter_node_bytes_per_s": self.inter_node_bytes_per_s,
            "scale_up_size": self.scale_up_size, "intra_node_link": self.intra_node_link,
            "intra_node_topology": self.intra_node_topology,
            "intra_node_bidirectional": self.intra_node_bidirectional,
            "intra_node_unidir_bytes_per_s": self.intra_node_unidir_bytes_per_s,
            "inter_node_bytes_per_s_per_accelerator": self.inter_node_bytes_per_s_per_accelerator,
            "tdp_watts": self.tdp_watts, "node_watts": self.node_watts,
            "price_per_hour": {m: self.price_per_hour(m) for m in self.modes},
            "price_per_accelerator_hour": {m: self.price_per_accelerator_hour(m) for m in self.modes},
            "prices": {m: {"available": p.available, "provider": p.provider, "instance": p.instance,
                           "region": p.region, "as_of": p.as_of, "term": p.term, "source": p.source}
                       for m, p in self.pricing.items()},
            "sources": self.sources,
        }


# ------------------------------------------------------------------------- parsing
class _Table:
    """A TOML table being validated: tracks used keys, errors name the dotted path."""

    def __init__(self, data: Any, path: str, file: str):
        if not isinstance(data, dict):
            raise ModelInputError(f"{file}: {path}: expected a table, got {type(data).__name__}")
        self.d, self.path, self.file, self.used = data, path, file, set()

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def err(self, key: str, msg: str) -> ModelInputError:
        return ModelInputError(f"{self.file}: {self._name(key)}: {msg}")

    def has(self, key: str) -> bool:
        return key in self.d

    def raw(self, key: str, default: Any = ...) -> Any:
        if key not in self.d:
            if default is ...:
                raise self.err(key, "missing required key")
            return default
        self.used.add(key)
        return self.d[key]

    def string(self, key: str, default: Any = ...) -> Any:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if not isinstance(v, str) or not v.strip():
            raise self.err(key, f"expected a non-empty string, got {v!r}")
        return v.strip()

    def source(self) -> str:
        v = self.raw("source", None)
        if v is None:
            raise self.err("source", "missing: every number needs a source")
        if not isinstance(v, str) or len(v.strip()) < 8:
            raise self.err("source", f"must say where the numbers come from, got {v!r}")
        return v.strip()

    def number(self, key: str, *, positive: bool = True, default: Any = ...) -> Any:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise self.err(key, f"expected a number, got {v!r}")
        if positive and v <= 0:
            raise self.err(key, f"must be > 0, got {v!r}")
        return float(v)

    def unit_number(self, stem: str, units: tuple[str, ...], *, required: bool = True) -> tuple[float | None, str | None]:
        """SI value of the one key ``<stem>_<unit>`` present (unit among ``units``)."""
        found = [u for u in units if f"{stem}_{u}" in self.d]
        if len(found) > 1:
            raise self.err(stem, f"given twice ({', '.join(f'{stem}_{u}' for u in found)}); keep one")
        if not found:
            if required:
                raise self.err(f"{stem}_{units[0]}", f"missing required key (any of {', '.join(f'{stem}_{u}' for u in units)})")
            return None, None
        key = f"{stem}_{found[0]}"
        return to_si(self.number(key), found[0]), key

    def choice(self, key: str, choices: tuple[str, ...], default: Any = ...) -> Any:
        v = self.raw(key, default)
        if v is default and default is not ...:
            return v
        if v not in choices:
            raise self.err(key, f"unknown value {v!r}; valid choices: {', '.join(choices)}")
        return v

    def as_of(self, key: str = "as_of") -> str:
        if "date" in self.d and key not in self.d:
            raise self.err("date", "renamed: write the listing date as as_of = \"YYYY-MM\" or \"YYYY-MM-DD\" "
                                   "(put any remark in the source)")
        v = self.raw(key)
        try:
            parse_as_of(v, key)
        except ModelInputError as exc:
            raise self.err(key, str(exc).split(": ", 1)[1]) from None
        return v.strip()

    def sub(self, key: str, required: bool = True) -> _Table | None:
        if key not in self.d:
            if required:
                raise self.err(key, "missing required table")
            return None
        self.used.add(key)
        return _Table(self.d[key], self._name(key), self.file)

    def done(self) -> None:
        extra = sorted(set(self.d) - self.used)
        if extra:
            raise self.err(extra[0], f"unknown key; valid keys here: {', '.join(sorted(self.used)) or '(none)'}")


def _parse_peak(t: _Table, dtype: str, node_id: str) -> Peak:
    units = ("tflops", "gflops", "pflops")
    dense, dkey = t.unit_number("dense", units)
    sparse, skey = t.unit_number("sparse", units, required=False)
    src = t.source()
    if sparse is not None:
        ratio = sparse / dense
        if abs(ratio - SPARSITY_FACTOR) > SPARSITY_TOL * SPARSITY_FACTOR:
            raise t.err(skey, f"with-sparsity figure must be {SPARSITY_FACTOR:g}x the dense figure (2:4 structured "
                              f"sparsity), got {ratio:.3g}x; is the sparse number in {dkey}?")
    der = t.sub("derivation", required=False)
    derivation = None
    if der is not None:
        n = der.number("units_count")
        per = der.number("flops_per_clock_per_unit_count")
        clk, _ = der.unit_number("clock", ("GHz",))
        derivation = {"units_count": n, "flops_per_clock_per_unit_count": per, "clock_hz": clk,
                      "flops_per_s": n * per * clk, "source": der.source()}
        der.done()
        derived = n * per * clk
        rel = dense / derived
        if abs(rel - 1) > DERIVATION_TOL:
            hint = " (2x: this looks like the with-sparsity figure used as dense)" if abs(rel - 2) < 0.06 else ""
            raise t.err(dkey, f"{dense / 1e12:.4g} TFLOP/s disagrees with its derivation units x FLOP/clock x clock "
                              f"= {derived / 1e12:.4g} TFLOP/s (ratio {rel:.3g}){hint}")
    t.done()
    return Peak(dtype, dense, sparse, src, derivation)


def _parse_price(t: _Table, mode: str) -> Price:
    avail = t.raw("available", True)
    if not isinstance(avail, bool):
        raise t.err("available", f"expected true or false, got {avail!r}")
    if not avail:
        src = t.source()
        t.done()
        return Price(mode, False, src)
    if mode == "on_prem":
        years = t.number("amortization_years")
        util = t.number("utilization_fraction")
        if util > 1:
            raise t.err("utilization_fraction", f"must be in (0, 1], got {util}")
        as_of = t.as_of()
        src = t.source()
        cap = t.sub("capex")
        capex = cap.number("node_usd")
        csrc = cap.source()
        cap.done()
        en = t.sub("energy")
        pue = en.number("pue_ratio")
        if pue < 1:
            raise en.err("pue_ratio", f"PUE is >= 1 by definition (The Green Grid), got {pue}")
        kwh = en.number("usd_per_kWh")
        esrc = en.source()
        en.done()
        t.done()
        return Price(mode, True, src, capex_usd=capex, amortization_years=years, utilization=util, pue=pue,
                     usd_per_kwh=kwh, capex_source=csrc, energy_source=esrc, as_of=as_of)
    usd = t.number("usd_per_hour")
    kw = {k: t.string(k) for k in ("provider", "instance", "region")}
    kw["as_of"] = t.as_of()
    term = t.string("term") if mode in RESERVED_MODES else None
    src = t.source()
    t.done()
    return Price(mode, True, src, usd_per_hour=usd, term=term, **kw)


def parse_node(data: dict[str, Any], file: str = "<catalog>", *, require_topology: bool = False) -> NodeType:
    """Validate one node-type mapping (as read from TOML) into a :class:`NodeType`.

    Catalog files (:func:`load_node`) must declare their topology
    (``require_topology=True``); a hand-built mapping without the topology
    keys gets a one-level default (``topology_declared=False``).
    """
    top = _Table(data, "", file)
    nid = top.string("id")
    file = f"{file} [{nid}]" if nid not in file else file
    top.file = file
    name = top.string("name")
    kind = top.string("kind")
    if kind not in KINDS:
        raise top.err("kind", f"unknown value {kind!r}; valid choices: {', '.join(KINDS)}")
    notes = top.string("notes", "")
    stack = top.choice("software_stack", STACKS, "")
    sources: dict[str, str] = {}

    acc = top.sub("accelerators")
    count = acc.number("per_node_count")
    if count != int(count):
        raise acc.err("per_node_count", f"must be a whole number, got {count}")
    mxu = acc.number("matrix_unit_dim", default=0)
    if mxu and mxu != int(mxu):
        raise acc.err("matrix_unit_dim", f"must be a whole number, got {mxu}")
    sources["accelerators"] = acc.source()
    acc.done()

    same_die = ""
    die = top.sub("die", required=False)
    if die is not None:
        same_die = die.string("same_as")
        if same_die == nid:
            raise die.err("same_as", f"names the node itself ({nid!r}); give another catalog id")
        sources["die"] = die.source()
        die.done()

    match: dict[str, Any] = {}
    m = top.sub("match", required=False)
    if m is not None:
        for k in ("cpu_model_contains", "cpu_flags_all", "gpu_name_contains"):
            v = m.raw(k, None)
            if v is not None:
                if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
                    raise m.err(k, f"expected a list of strings, got {v!r}")
                match[k] = v
        if m.has("cores_max"):
            match["cores_max"] = int(m.number("cores_max"))
        m.done()

    pk = top.sub("peak")
    peaks = {}
    for dtype in list(pk.d):
        if dtype not in DTYPES:
            raise pk.err(dtype, f"unknown dtype; valid choices: {', '.join(DTYPES)}")
        sub = pk.sub(dtype)
        peaks[dtype] = _parse_peak(sub, dtype, nid)
        sources[f"peak.{dtype}"] = peaks[dtype].source
    if not peaks:
        raise pk.err("fp32", "no dtype given; at least one [peak.<dtype>] table is required")
    pk.done()

    mem = top.sub("memory")
    cap, _ = mem.unit_number("capacity", ("GB", "GiB", "TB"))
    bw, _ = mem.unit_number("bandwidth", ("TBps", "GBps"))
    sources["memory"] = mem.source()
    mem.done()

    ln = top.sub("links")
    intra, _ = ln.unit_number("intra_node", ("GBps", "TBps", "Gbps"))
    inter, _ = ln.unit_number("inter_node", ("GBps", "Gbps", "TBps"))
    topo_keys = ("scale_up_size", "intra_node_link", "intra_node_topology", "intra_node_direction")
    declared = require_topology or any(ln.has(k) for k in topo_keys)
    if declared:
        direction = ln.choice("intra_node_direction", DIRECTIONS)
        link = ln.string("intra_node_link")
        topology = ln.choice("intra_node_topology", TOPOLOGIES)
        sus = ln.number("scale_up_size")
        if sus != int(sus):
            raise ln.err("scale_up_size", f"must be a whole number, got {sus}")
        scale_up = int(sus)
        if scale_up < count and topology != "none":
            raise ln.err("scale_up_size", f"{scale_up} is smaller than accelerators.per_node_count = {int(count)}; "
                                          "a node's accelerators share its scale-up fabric")
        if topology == "none" and scale_up != 1:
            raise ln.err("scale_up_size", f"must be 1 when intra_node_topology = \"none\", got {scale_up}")
    else:  # an undeclared topology (parse_node on a hand-built mapping): one level, datasheet figure as bidirectional
        direction, link, topology = "bidirectional", "", ("switch" if count > 1 else "none")
        scale_up = int(count)
    sources["links"] = ln.source()
    ln.done()
    bidir = direction == "bidirectional"
    intra_unidir = intra / 2 if bidir else intra

    pw = top.sub("power")
    tdp = pw.number("tdp_watts")
    node_w = pw.number("node_watts")
    sources["power"] = pw.source()
    pw.done()

    pr = top.sub("pricing")
    pricing = {}
    for mode in list(pr.d):
        if mode not in MODES:
            raise pr.err(mode, f"unknown pricing mode; valid choices: {', '.join(MODES)}")
        pricing[mode] = _parse_price(pr.sub(mode), mode)
        sources[f"pricing.{mode}"] = pricing[mode].source
        if pricing[mode].capex_source:
            sources["pricing.on_prem.capex"] = pricing[mode].capex_source
            sources["pricing.on_prem.energy"] = pricing[mode].energy_source
    for mode in REQUIRED_MODES:
        if mode not in pricing:
            raise pr.err(mode, "missing pricing mode (give the numbers, or available = false with a source saying why)")
    pr.done()
    top.done()
    return NodeType(id=nid, name=name, kind=kind, accelerators_per_node=int(count), peaks=peaks,
                    memory_capacity_bytes=cap, memory_bandwidth_bytes_per_s=bw, intra_node_bytes_per_s=intra,
                    inter_node_bytes_per_s=inter, tdp_watts=tdp, node_watts=node_w, pricing=pricing,
                    sources=sources, match=match, notes=notes, path=file, scale_up_size=scale_up,
                    intra_node_link=link, intra_node_topology=topology, intra_node_bidirectional=bidir,
                    intra_node_unidir_bytes_per_s=intra_unidir,
                    inter_node_bytes_per_s_per_accelerator=inter / count, topology_declared=declared,
                    software_stack=stack, same_die_as=same_die,
                    matrix_unit_dim=int(mxu))


def load_node(path: str | os.PathLike[str]) -> NodeType:
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ModelInputError(f"catalog: cannot read {p}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ModelInputError(f"catalog: {p.name}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:  # a binary or non-UTF-8 file
        raise ModelInputError(f"catalog: {p.name}: not UTF-8 text (byte offset {exc.start})") from None
    return parse_node(data, p.name, require_topology=True)


@dataclass(frozen=True)
class Catalog:
    nodes: dict[str, NodeType]
    path: str = ""

    def ids(self) -> list[str]:
        return sorted(self.nodes)

    def get(self, node_id: str) -> NodeType:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise choices_error("node", node_id, self.nodes) from None

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes

    def __iter__(self):
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def with_node(self, node: NodeType) -> Catalog:
        return replace(self, nodes={**self.nodes, node.id: node})


def _catalog_files(path_or_dir: str | os.PathLike[str] | None) -> tuple[Path, list[Path]]:
    """The catalog path (default ``data/catalog``) and its ``*.toml`` files (one file given: itself)."""
    p = Path(path_or_dir) if path_or_dir is not None else default_dir()
    if p.is_dir():
        files = sorted(p.glob("*.toml"))
        if not files:
            raise ModelInputError(f"catalog: no *.toml files in {p}")
    elif p.is_file():
        files = [p]
    else:
        raise ModelInputError(f"catalog: no such file or directory {str(p)!r}")
    return p, files


def load_catalog(path_or_dir: str | os.PathLike[str] | None = None) -> Catalog:
    """Load one ``.toml`` file or every ``*.toml`` in a directory (default ``data/catalog``)."""
    p, files = _catalog_files(path_or_dir)
    nodes: dict[str, NodeType] = {}
    for f in files:
        n = load_node(f)
        if n.id in nodes:
            raise ModelInputError(f"catalog: node id {n.id!r} defined twice ({nodes[n.id].path} and {f.name})")
        nodes[n.id] = n
    for n in nodes.values():
        if (msg := _same_die_error(n, nodes)) is not None:
            raise ModelInputError(f"catalog: {msg}")
    return Catalog(nodes, str(p))


def _same_die_error(node: NodeType, nodes: dict[str, Any]) -> str | None:
    """One line if ``node``'s ``[die] same_as`` names no node of ``nodes`` (None when it is fine or unset).
    A catalog given as one file cannot check it (its sibling is in another file)."""
    if not node.same_die_as or len(nodes) == 1 or node.same_die_as in nodes:
        return None
    name = Path(node.path.split(" [")[0]).name if node.path else node.id
    return (f"{name}: die.same_as: unknown node {node.same_die_as!r}; valid choices: "
            f"{', '.join(sorted(set(nodes) - {node.id}))}")


_DEFAULT: Catalog | None = None


def default_catalog() -> Catalog:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_catalog()
    return _DEFAULT


def record_node(*, params: dict[str, Any] | None = None, fingerprint: dict[str, Any] | None = None,
                node_id: str | None = None, device: str | None = None,
                catalog: Catalog | None = None) -> NodeType | None:
    """The catalog node type a stored measurement was made on, or None.

    A catalog id the record names wins: ``params["catalog_node"]`` / ``params["node"]``, or a record ``node_id``
    that is a catalog id (importers write one). Otherwise the node its fingerprint matches (:func:`match_node`;
    a suite-run record's ``node_id`` is the fingerprint's hash, not a catalog id), and only when the record's
    ``device`` is of that node's kind: a kernel run on the CPU of a GPU host measured the host, not the node's
    accelerators (and a GPU run on a CPU node cannot be).
    """
    cat = catalog or default_catalog()
    for nid in ((params or {}).get("catalog_node"), (params or {}).get("node"), node_id):
        if isinstance(nid, str) and nid in cat:
            return cat.get(nid)
    node = match_node(dict(fingerprint or {}), cat)
    if node is None:
        return None
    on_cpu = str(device or "cpu").startswith("cpu")
    return node if on_cpu == (node.kind == "cpu") else None


def match_node(fingerprint: dict[str, Any], catalog: Catalog | None = None) -> NodeType | None:
    """The catalog node type matching a :func:`hwcore.fingerprint.fingerprint` dict, or None.

    GPUs are matched by name (``gpu_name_contains``, case-insensitive; where several nodes match, the longest
    matching pattern wins, so "GB200" is not taken for "B200"); without
    GPUs, the CPU by ``cpu_model_contains``, every flag in ``cpu_flags_all``
    and ``cores_usable <= cores_max``.
    """
    cat = catalog or default_catalog()
    gpus = fingerprint.get("gpus") or []
    names = [str(g.get("name", "") if isinstance(g, dict) else (g[0] if isinstance(g, list | tuple) and g else g)).lower()
             for g in gpus]
    best, best_len = None, -1
    for node in cat:  # the most specific pattern wins: "GB200" over "B200" for "NVIDIA GB200"
        pats = [s.lower() for s in node.match.get("gpu_name_contains", [])]
        if names and pats and all(any(p in n for p in pats) for n in names):
            length = min(max(len(p) for p in pats if p in n) for n in names)
            if length > best_len:
                best, best_len = node, length
    if names:
        return best
    model = str(fingerprint.get("cpu_model") or "").lower()
    flags = fingerprint.get("cpu_flags") or {}
    cores = fingerprint.get("cores_usable") or fingerprint.get("cores_logical") or 0
    for node in cat:
        pats = [s.lower() for s in node.match.get("cpu_model_contains", [])]
        if not pats or not any(p in model for p in pats):
            continue
        need = node.match.get("cpu_flags_all", [])
        if isinstance(flags, dict):
            if not all(flags.get(f) for f in need):
                continue
        elif not all(f in flags for f in need):
            continue
        if "cores_max" in node.match and cores and cores > node.match["cores_max"]:
            continue
        return node
    return None


@dataclass(frozen=True)
class CatalogCheck:
    """Result of :func:`check_catalog`: every file read on its own, every problem one line."""

    path: str
    files: list[str]
    nodes: list[NodeType]
    errors: list[str]
    today: _dt.date

    @property
    def ok(self) -> bool:
        return not self.errors

    def stale(self) -> dict[str, list[str]]:
        """node id -> available modes whose price is older than 12 months on ``today``."""
        return {n.id: s for n in self.nodes if (s := n.stale_prices(self.today))}


def check_catalog(path_or_dir: str | os.PathLike[str] | None = None, *,
                  today: _dt.date | str | None = None) -> CatalogCheck:
    """Validate every ``*.toml`` (or one file) independently, collecting one error line per bad file.

    Beyond what loading checks (units, sources, dense/sparse = 2x, derivations
    within 3%, topology, dates that parse), a file must be named after its id
    and no price may be dated after ``today``; ids must be unique.
    """
    t = _today(today)
    p, files = _catalog_files(path_or_dir)
    nodes: list[NodeType] = []
    errors: list[str] = []
    seen: dict[str, str] = {}
    for f in files:
        try:
            n = load_node(f)
        except ModelInputError as exc:
            msg = str(exc)
            errors.append(msg if msg.startswith(f.name) else f"{f.name}: {msg.removeprefix('catalog: ')}")
            continue
        if n.id != f.stem:
            errors.append(f"{f.name}: id: {n.id!r} does not match the file name (expected id = {f.stem!r})")
            continue
        future = [m for m, pr in n.pricing.items() if pr.as_of and parse_as_of(pr.as_of) > t]
        if future:
            m = future[0]
            errors.append(f"{f.name}: pricing.{m}.as_of: {n.pricing[m].as_of!r} is after today ({t.isoformat()})")
            continue
        if n.id in seen:
            errors.append(f"{f.name}: id: {n.id!r} already defined in {seen[n.id]}")
            continue
        seen[n.id] = f.name
        nodes.append(n)
    # a sibling whose own file is invalid is reported there, not here too
    known = {**{f.stem: None for f in files}, **{n.id: n for n in nodes}}
    for n in nodes:
        if (msg := _same_die_error(n, known)) is not None:
            errors.append(msg)
    return CatalogCheck(str(p), [f.name for f in files], nodes, errors, t)
