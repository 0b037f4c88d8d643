"""Notebook parameters: read with papermill's own inspection, typed with :mod:`hwcore.params`.

A notebook's ``parameters`` cell is a list of ``name: type = value  # help``
lines. :func:`notebook_parameters` reads it with papermill's Python
translator (``papermill --help-notebook`` and ``papermill.inspect_notebook``
use the same parser), so every parameter the plan validator accepts is one
papermill documents; a line papermill cannot read (an annotation outside its
grammar, a ``=`` inside the help comment) is bad input naming the line.

Each parameter gets a :class:`hwcore.params.Type`: the suite's parameter
vocabulary (:func:`vocabulary`) gives the meaning of a name across notebooks
with the same ranges the registries use (``gemm_sizes`` items are
``kernels.registry`` ``gemm.m`` values, ``max_steps`` a workload's
``max_steps``, ``node`` a catalog id, ...); a name outside the vocabulary is
typed by its annotation alone (floats always finite). :func:`check_cell` then
checks one cell's complete parameter set the way its notebook will use it:
``workload_params`` through the workload registry (unknown knobs, ranges and
cross-field rules such as ``heads`` dividing ``width``) and kernel sizes
against the memory of the node the cell runs on.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from hwcore import params as P
from hwcore.errors import InputError, choices_error


@dataclass(frozen=True, kw_only=True)
class Parameter:
    """One entry of a notebook's ``parameters`` cell: ``name: type = default  # help``."""

    name: str
    annotation: str
    default: Any
    help: str = ""

    @property
    def type(self) -> P.Type:
        return param_type(self.name, self.annotation)


def _papermill_inspect(source: str) -> list[Any]:
    """papermill's own reading of a Python ``parameters`` cell (what ``--help-notebook`` shows)."""
    import logging

    from nbformat.v4 import new_code_cell
    from papermill.translators import papermill_translators

    translator = papermill_translators.find_translator("python3", "python")
    logger = logging.getLogger("papermill.translators")
    level = logger.level
    logger.setLevel(logging.ERROR)  # it warns about lines it drops; we report them as errors instead
    try:
        return list(translator.inspect(new_code_cell(source, metadata={"tags": ["parameters"]})))
    finally:
        logger.setLevel(level)


def parse_parameters(source: str, *, where: str = "parameters cell") -> dict[str, Parameter]:
    """Parse the source of a ``parameters`` cell into ``{name: Parameter}``.

    Every statement must be an annotated assignment of a literal
    (``batch_size: int = 8  # help``) that papermill's inspection reads too,
    and each default must fit its own type.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"{where}: syntax error at line {exc.lineno}: {exc.msg}") from exc
    seen = {p.name: p for p in _papermill_inspect(source)}
    lines = source.splitlines()
    params: dict[str, Parameter] = {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None):
            raise InputError(f"{where}: line {node.lineno}: expected 'name: type = value  # help'")
        name = node.target.id
        try:
            default = ast.literal_eval(node.value)
        except ValueError as exc:
            raise InputError(f"{where}: {name}: default must be a literal") from exc
        pm = seen.get(name)
        if pm is None:
            line = lines[node.lineno - 1] if node.lineno <= len(lines) else ""
            why = ("its help comment contains '='" if line.count("=") > 1
                   else "its annotation is outside papermill's grammar")
            raise InputError(f"{where}: line {node.lineno}: papermill cannot read parameter {name!r} ({why}); "
                             "write 'name: type = value  # help' with one '=' and a plain annotation")
        annotation = ast.unparse(node.annotation)
        if isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str):
            annotation = node.annotation.value
        param_type(name, annotation, where=f"{where}: {name}").parse(default, f"{where}: {name}", strict=True)
        params[name] = Parameter(name=name, annotation=annotation, default=default, help=pm.help)
    return params


@lru_cache(maxsize=64)
def _notebook_parameters_cached(path: str, mtime_ns: int) -> dict[str, Parameter]:
    import jupytext

    try:
        nb = jupytext.read(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure is bad input
        first = (str(exc).splitlines() or [""])[0]
        raise InputError(f"{path}: cannot read notebook: {type(exc).__name__}: {first}") from exc
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise InputError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    return parse_parameters(cells[0].source, where=f"{path}: parameters cell")


def notebook_parameters(path: str | Path) -> dict[str, Parameter]:
    """The declared parameters of a jupytext notebook (``.py`` percent script or ``.ipynb``)."""
    p = Path(path)
    return _notebook_parameters_cached(str(p), p.stat().st_mtime_ns)


# -- the vocabulary -------------------------------------------------------------------
def _kernel_spec(kernel: str, param: str) -> P.Type:
    from kernels import registry

    return next(p.spec for p in registry.get(kernel).params if p.name == param)


def _knob_spec(name: str) -> P.Type:
    from workloads.config import TrainKnobs, field_specs

    return field_specs(TrainKnobs)[name]


def _catalog_ids(catalog_dir: str | None = None, where: str = "catalog") -> tuple[str, ...]:
    """Node ids of the default catalog, or of ``catalog_dir`` (a directory or one ``.toml`` file)."""
    from hwmodels.catalog import default_catalog, load_catalog

    try:
        return tuple((load_catalog(catalog_dir) if catalog_dir else default_catalog()).ids())
    except (ValueError, OSError) as exc:  # hwmodels.errors.ModelInputError: a malformed or missing catalog
        raise InputError(f"{where}: {exc}") from exc


#: parameters naming catalog node ids: checked against the cell's own ``catalog_dir`` when it declares one
CATALOG_ID_PARAMS = ("node", "measured_node", "candidates")


def _check_catalog_ids(declared: Mapping[str, Parameter], full: Mapping[str, Any], where: str) -> None:
    names = [n for n in CATALOG_ID_PARAMS if n in declared]
    if not names:
        return
    cdir = str(full.get("catalog_dir") or "") if "catalog_dir" in declared else ""
    if cdir and not Path(cdir).is_absolute():
        cdir = str(Path(__file__).resolve().parent.parent / cdir)  # notebooks run in the project root
    ids = _catalog_ids(cdir or None, f"{where}.catalog_dir")
    for name in names:
        val = full.get(name)
        vals = [(f"{where}.{name}[{i}]", v) for i, v in enumerate(val)] if isinstance(val, list) \
            else [(f"{where}.{name}", val)]
        for field, v in vals:
            if v not in ids and not (v == "" and name != "candidates"):
                raise choices_error(field, v, ids)


def _stream_ops() -> tuple[str, ...]:
    from kernels import registry

    return tuple(k.name.removeprefix("stream_") for k in registry.list_kernels() if k.name.startswith("stream_"))


def _collectives() -> tuple[str, ...]:
    from kernels import registry

    return tuple(k.name for k in registry.list_kernels() if k.kind == "collective")


def _workloads() -> tuple[str, ...]:
    from workloads import registry

    return tuple(registry.list_workloads())


def _presets() -> tuple[str, ...]:
    from workloads import registry

    return tuple(sorted({p for w in registry.WORKLOADS.values() for p in w.presets}))


def _pricing_modes() -> tuple[str, ...]:
    from hwmodels.catalog import MODES

    return tuple(MODES)


def _catalog_dtypes() -> tuple[str, ...]:
    from hwmodels.catalog import DTYPES

    return tuple(DTYPES)


_FRACTION = P.Float(min=0, max=1, min_open=True)

#: name -> Type factory: what a parameter name means in every notebook of the suite.
VOCABULARY: dict[str, Callable[[], P.Type]] = {
    "device": lambda: P.DEVICE,
    "gemm_sizes": lambda: P.List(_kernel_spec("gemm", "m")),
    "gemm_dtypes": lambda: P.List(_kernel_spec("gemm", "dtype")),
    "stream_ops": lambda: P.List(P.Str(choices=_stream_ops())),
    "stream_sizes": lambda: P.List(_kernel_spec("stream_copy", "n")),
    "dispatch_tensors": lambda: P.List(_kernel_spec("dispatch", "tensors"), nonempty=False),
    "warmup_ms": lambda: __import__("kernels.registry", fromlist=["WARMUP_MS"]).WARMUP_MS,
    "measure_ms": lambda: __import__("kernels.registry", fromlist=["MEASURE_MS"]).MEASURE_MS,
    # catalog ids: checked by check_cell against the cell's catalog_dir (default catalog when it has none)
    "node": lambda: P.Str(oneline=True),
    "measured_node": lambda: P.Str(oneline=True),
    "candidates": lambda: P.List(P.Str(oneline=True), nonempty=False),
    "workloads_list": lambda: P.List(P.Str(choices=_workloads())),
    "workload": lambda: P.Str(choices=_workloads()),
    "preset": lambda: P.Str(choices=_presets(), also=("",)),
    "workload_params": lambda: P.Dict(),  # checked per cell against the workload (check_cell)
    "max_steps": lambda: _knob_spec("max_steps"),
    "max_time_s": lambda: _knob_spec("max_time_s"),
    "target_loss": lambda: _knob_spec("target_loss"),
    "collectives": lambda: P.List(P.Str(choices=_collectives())),
    "world_size": lambda: _kernel_spec("all_reduce", "world_size"),
    "sizes_bytes": lambda: P.List(_kernel_spec("all_reduce", "size_bytes")),
    "nprocs_list": lambda: P.List(_knob_spec("nprocs")),
    "repeats": lambda: P.Int(min=1, max=1000),
    "level": lambda: P.Float(min=0, max=1, min_open=True, max_open=True),
    "plan_name": lambda: P.Str(oneline=True),
    "report_dir": lambda: P.Str(nonempty=True, oneline=True),
    "pricing": lambda: P.List(P.Str(choices=_pricing_modes())),
    "dtype": lambda: P.Str(choices=_catalog_dtypes()),
    "utilization": lambda: _FRACTION,
    "utilization_range": lambda: P.List(_FRACTION, length=2),
    "title": lambda: P.Str(oneline=True),
    "job": lambda: P.Dict(),  # injected by the runner from the plan's job section (hweval.job validates it)
    "catalog_dir": lambda: P.Str(oneline=True),
    "prices_csv": lambda: P.Str(oneline=True),
    "today": lambda: P.Str(pattern=r"[0-9]{4}-[0-9]{2}-[0-9]{2}", also=("",), what="a date YYYY-MM-DD or empty"),
}


@cache
def vocabulary(name: str) -> P.Type | None:
    """The suite-wide :class:`~hwcore.params.Type` of parameter ``name`` (``None`` if it has none)."""
    make = VOCABULARY.get(name)
    return make() if make is not None else None


def param_type(name: str, annotation: str, *, where: str = "annotation") -> P.Type:
    """``name``'s vocabulary type, else the type its annotation spells."""
    base = P.from_annotation(annotation, where)
    return vocabulary(name) or base


# -- one cell, as its notebook will use it ---------------------------------------------
def check_cell(declared: Mapping[str, Parameter], params: Mapping[str, Any], *, where: str,
               node: str | None = None, local: bool = False) -> None:
    """Check a cell's parameters together (defaults filled in); errors name ``where.<param>``."""
    full = {name: params.get(name, prm.default) for name, prm in declared.items()}
    _check_catalog_ids(declared, full, where)
    _check_workload_params(declared, full, params, where)
    if node is not None:
        _check_memory(full, params, where, node, local)


def _workload_sets(declared: Mapping[str, Parameter], full: Mapping[str, Any],
                   where: str) -> list[tuple[str, dict[str, Any], str]]:
    """``[(workload, its workload_params, field)]`` for the workloads a cell trains."""
    wp = full.get("workload_params") or {}
    if "workloads_list" in declared:  # {workload: {knob: value}}
        names = list(full.get("workloads_list") or [])
        for key in wp:
            if key not in names:
                raise InputError(f"{where}.workload_params.{key}: not a workload of this cell; "
                                 f"valid choices (workloads_list): {', '.join(names)}")
        out = []
        for w in names:
            sub = wp.get(w, {})
            if not isinstance(sub, Mapping):
                raise P.fail(f"{where}.workload_params.{w}", "a mapping of workload parameters", sub)
            out.append((w, dict(sub), f"{where}.workload_params.{w}"))
        return out
    if "workload" in declared:
        return [(full["workload"], dict(wp), f"{where}.workload_params")]
    return []


def _check_workload_params(declared: Mapping[str, Parameter], full: Mapping[str, Any], given: Mapping[str, Any],
                           where: str) -> None:
    if "workload_params" not in declared:
        return
    from workloads import registry
    from workloads.config import field_specs

    for workload, wp, field_name in _workload_sets(declared, full, where):
        cls = registry.get(workload).config_cls
        specs = field_specs(cls)
        typed = {}
        for key, val in wp.items():
            if key == "preset":
                typed[key] = P.Str(choices=tuple(registry.get(workload).presets)).parse(val, f"{field_name}.preset")
                continue
            if key not in specs:
                raise InputError(f"{field_name}.{key}: workload {workload} has no parameter {key!r}; "
                                 f"valid choices: preset, {', '.join(sorted(specs))}")
            typed[key] = specs[key].parse(val, f"{field_name}.{key}", strict=True)
        raw: dict[str, Any] = {}
        if full.get("preset"):
            raw["preset"] = full["preset"]
        raw.update(typed)
        for knob in ("max_steps", "max_time_s", "target_loss"):  # the notebooks pass these to workloads.run,
            if full.get(knob):  # where they override workload_params (target_loss 0: the workload's default)
                raw[knob] = full[knob]
        counts = list(full.get("nprocs_list") or [None])
        for n in counts:
            try:
                registry.config_from_params(workload, {**raw, **({"nprocs": n} if n is not None else {})})
            except InputError as exc:
                at = f" (nprocs_list item {n})" if n is not None else ""
                raise InputError(f"{field_name}: {exc}{at}") from None


def _memory_limit(node: str, device: str, local: bool) -> tuple[float, str] | None:
    from hwmodels.catalog import default_catalog

    try:
        nt = default_catalog().get(node)
    except (KeyError, ValueError):
        return None
    limit, what = float(nt.memory_capacity_bytes), f"node {node}'s {nt.memory_capacity_bytes / 2**30:.0f} GiB"
    if local and device == "cpu":
        import psutil

        total = float(psutil.virtual_memory().total)
        if total < limit:
            limit, what = total, f"this machine's {total / 2**30:.1f} GiB"
    return (limit, what) if math.isfinite(limit) and limit > 0 else None


def _check_memory(full: Mapping[str, Any], given: Mapping[str, Any], where: str, node: str, local: bool) -> None:
    """Kernel sizes that cannot fit in the node's memory at all (``kernel.memory_bytes``) are refused."""
    sets: list[tuple[str, str, list[Any], Callable[[Any], list[dict[str, Any]]]]] = []
    if "gemm_sizes" in full:
        dtypes = full.get("gemm_dtypes") or ["fp32"]
        sets.append(("gemm_sizes", "gemm", list(full["gemm_sizes"]),
                     lambda s: [{"m": s, "n": s, "k": s, "dtype": d} for d in dtypes]))
    if "stream_sizes" in full:
        for op in full.get("stream_ops") or ["copy"]:
            sets.append(("stream_sizes", f"stream_{op}", list(full["stream_sizes"]), lambda n: [{"n": n}]))
    if "sizes_bytes" in full:
        ws = full.get("world_size", 2)
        for c in full.get("collectives") or ["all_reduce"]:
            sets.append(("sizes_bytes", c, list(full["sizes_bytes"]),
                         lambda b, ws=ws: [{"size_bytes": b, "world_size": ws}]))
    if not sets:
        return
    device = str(full.get("device", "cpu") or "cpu")
    lim = _memory_limit(node, "cpu" if device == "cpu" else "cuda", local)
    if lim is None:
        return
    limit, what = lim
    from kernels import registry

    for pname, kname, values, expand in sets:
        kernel = registry.get(kname)
        if kernel.memory_bytes is None:
            continue
        for i, v in enumerate(values):
            for p in expand(v):
                need = float(kernel.memory_bytes(registry.validate_params(kname, p)))
                if need > limit:
                    raise InputError(f"{where}.{pname}[{i}]: {v} needs ~{need / 2**30:.3g} GiB for {kname} "
                                     f"({', '.join(f'{k}={x}' for k, x in p.items())}), more than {what} of memory")
