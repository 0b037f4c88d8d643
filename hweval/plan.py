"""Plans: which notebooks run on which nodes with which parameters, and which report to build.

A plan is a YAML file, validated in full by :func:`load_plan` before anything
runs: unknown keys, unknown notebooks, parameters a notebook does not declare,
values of the wrong type (checked against the annotation of the notebook's
``parameters`` cell), and nodes missing from the hardware catalog all raise one
:class:`~hwcore.errors.InputError` naming the file and the dotted field::

    plans/x.yaml: matrix[2].params.batch_size: expected int, got 'abc'

Schema (see ``plans/quick.yaml`` for a worked example)::

    name: quick                       # optional; default: the file's stem
    description: one line             # optional
    notebooks_dir: ../notebooks       # optional; relative to the plan file (default: the suite's notebooks/)
    defaults: {timeout_s: 600}        # optional; per-notebook wall-clock limit
    nodes:                            # catalog node ids this plan measures on
      - id: cpu-epyc-zen4-2c
        local: true                   # runnable by the local backend (default: true unless `slurm` is given)
        slurm: {partition: cpu}       # passed through untouched to the Slurm backend
    matrix:                           # nodes x notebooks x parameters
      - notebook: 01_node_characterization
        nodes: [cpu-epyc-zen4-2c]     # optional; default: every node of the plan
        params: {gemm_sizes: [256]}   # values typed by the notebook's parameters cell
        grid: {batch_size: [8, 16]}   # optional; cartesian product, one cell per combination
        timeout_s: 300                # optional
    report:                           # optional; built after the cells
      notebook: 05_procurement_report
      params: {...}
    job:                              # optional; the training job the report prices (hweval.job)
      {model: llama2-7b, tokens: 1.0e12, accelerators: [256, 512], pricing: [on_demand]}

:meth:`Plan.cells` expands the matrix into :class:`Cell` objects whose
``cell_id`` is a stable, filesystem-safe hash of node + notebook + parameters.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwcore import params as P
from hwcore.errors import InputError
from hweval.notebook_params import Parameter, check_cell, notebook_parameters, parse_parameters

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO / "notebooks"
DEFAULT_TIMEOUT_S = 1800.0
#: Parameters the runner injects into the report notebook (when it declares them).
REPORT_INJECTED = ("plan_name", "report_dir", "job")

_TOP_KEYS = {"name", "description", "notebooks_dir", "defaults", "nodes", "matrix", "report", "job"}
_DEFAULT_KEYS = {"timeout_s"}
_NODE_KEYS = {"id", "local", "slurm", "description"}
_ENTRY_KEYS = {"notebook", "nodes", "params", "grid", "timeout_s"}
_REPORT_KEYS = {"notebook", "params", "timeout_s"}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- notebook parameters ------------------------------------------------------------
# read with papermill's own inspection and typed by hwcore.params (see hweval.notebook_params)
__all__ = ["Parameter", "notebook_parameters", "parse_parameters", "available_notebooks", "load_plan", "Plan",
           "Cell", "Node", "make_cell_id"]


def available_notebooks(notebooks_dir: Path) -> dict[str, Path]:
    """``{name: path}`` of the jupytext scripts in ``notebooks_dir`` (``01_x.py`` -> ``01_x``)."""
    if not notebooks_dir.is_dir():
        return {}
    return {p.stem: p for p in sorted(notebooks_dir.glob("*.py")) if not p.name.startswith("_")}


def _type_name(value: Any) -> str:
    return type(value).__name__


# -- plan objects ----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Node:
    id: str
    local: bool = True
    slurm: dict[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One notebook execution: a node, a notebook, its parameters and limits."""

    cell_id: str
    node: str
    notebook: str
    notebook_path: str
    params: dict[str, Any]
    timeout_s: float
    local: bool = True
    slurm: dict[str, Any] = field(default_factory=dict)
    is_report: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "cell_id": self.cell_id,
            "node": self.node,
            "notebook": self.notebook,
            "notebook_path": self.notebook_path,
            "params": self.params,
            "timeout_s": self.timeout_s,
            "local": self.local,
            "slurm": self.slurm,
            "is_report": self.is_report,
        }


def make_cell_id(node: str, notebook: str, params: Mapping[str, Any]) -> str:
    """Stable, filesystem-safe id: ``<notebook>--<node>--<sha1(node, notebook, params)[:10]>``."""
    blob = json.dumps({"node": node, "notebook": notebook, "params": params}, sort_keys=True, default=str)
    digest = hashlib.sha1(blob.encode()).hexdigest()[:10]
    return _SAFE.sub("_", f"{notebook}--{node}--{digest}")


@dataclass(frozen=True, kw_only=True)
class MatrixEntry:
    notebook: str
    nodes: tuple[str, ...]
    params: dict[str, Any]
    grid: dict[str, list[Any]]
    timeout_s: float


@dataclass(frozen=True, kw_only=True)
class ReportSpec:
    notebook: str
    params: dict[str, Any]
    timeout_s: float


@dataclass(frozen=True, kw_only=True)
class Plan:
    path: Path
    name: str
    description: str
    notebooks_dir: Path
    nodes: tuple[Node, ...]
    matrix: tuple[MatrixEntry, ...]
    report: ReportSpec | None
    default_timeout_s: float
    job: dict[str, Any] | None = None  # the declared training job (hweval.job.parse_job), as a plain mapping

    def node(self, node_id: str) -> Node:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def notebook_path(self, notebook: str) -> Path:
        return self.notebooks_dir / f"{notebook}.py"

    def cells(self) -> list[Cell]:
        """Every (node, notebook, parameters) combination, in plan order, duplicates dropped."""
        out: list[Cell] = []
        seen: set[str] = set()
        for entry in self.matrix:
            keys = list(entry.grid)
            combos = itertools.product(*(entry.grid[k] for k in keys)) if keys else [()]
            for combo in combos:
                params = dict(entry.params)
                params.update(dict(zip(keys, combo, strict=True)))
                for node_id in entry.nodes:
                    node = self.node(node_id)
                    cid = make_cell_id(node_id, entry.notebook, params)
                    if cid in seen:
                        continue
                    seen.add(cid)
                    out.append(
                        Cell(
                            cell_id=cid,
                            node=node_id,
                            notebook=entry.notebook,
                            notebook_path=str(self.notebook_path(entry.notebook)),
                            params=params,
                            timeout_s=entry.timeout_s,
                            local=node.local,
                            slurm=dict(node.slurm),
                        )
                    )
        return out

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells():
            if c.cell_id == cell_id:
                return c
        rc = self.report_cell()
        if rc is not None and rc.cell_id == cell_id:
            return rc
        valid = [c.cell_id for c in self.cells()] + ([rc.cell_id] if rc else [])
        raise InputError(f"--cell: no cell {cell_id!r} in plan {self.name}; valid choices: {', '.join(valid)}")

    def report_node(self) -> Node:
        for n in self.nodes:
            if n.local:
                return n
        return self.nodes[0]

    def report_cell(self, *, report_dir: str | Path | None = None) -> Cell | None:
        """The report notebook as a cell; ``plan_name``/``report_dir`` are injected when declared."""
        if self.report is None:
            return None
        node = self.report_node()
        params = dict(self.report.params)
        declared = notebook_parameters(self.notebook_path(self.report.notebook))
        if "plan_name" in declared:
            params["plan_name"] = self.name
        if self.job is not None and "job" in declared:
            params["job"] = dict(self.job)
        # cell_id is computed before report_dir is injected: the output location is not part of identity
        cid = make_cell_id("report", self.report.notebook, params)
        if report_dir is not None and "report_dir" in declared:
            params["report_dir"] = str(report_dir)
        return Cell(
            cell_id=cid,
            node=node.id,
            notebook=self.report.notebook,
            notebook_path=str(self.notebook_path(self.report.notebook)),
            params=params,
            timeout_s=self.report.timeout_s,
            local=True,
            slurm=dict(node.slurm),
            is_report=True,
        )


# -- loading --------------------------------------------------------------------------
#: A plan is a short hand-written file; anything bigger is not one.
MAX_PLAN_BYTES = 1 << 20
#: Set to 1 to let ``notebooks_dir`` point outside the project and the plan's own folder.
ALLOW_EXTERNAL_NOTEBOOKS_ENV = "HWEVAL_ALLOW_EXTERNAL_NOTEBOOKS"
TIMEOUT = P.Float(min=0, min_open=True, max=7 * 86400, unit="seconds")


def _catalog_ids() -> list[str]:
    from hwmodels.catalog import default_catalog

    try:
        return list(default_catalog().ids())
    except ValueError as exc:  # hwmodels.errors.ModelInputError: a malformed catalog file
        raise InputError(f"catalog: {exc}") from exc


def _plan_loader():  # -> type[yaml.SafeLoader]
    import yaml

    class PlanLoader(yaml.SafeLoader):
        """``yaml.SafeLoader`` without aliases: ``*name`` is refused, so a tiny file cannot expand (no alias bomb)."""

        def compose_node(self, parent, index):  # noqa: ANN001, ANN201 - PyYAML's signature
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(
                    None, None, f"YAML alias *{event.anchor} is not allowed in a plan (write the value out)",
                    event.start_mark)
            return super().compose_node(parent, index)

    return PlanLoader


def _read_yaml(p: Path, label: str) -> Any:
    """The plan file's YAML (aliases refused), or one ``InputError`` line for a file that is not one."""
    import yaml

    if not p.is_file():
        raise InputError(f"--plan: {label}: no such file")
    size = p.stat().st_size
    if size > MAX_PLAN_BYTES:
        raise InputError(f"{label}: {size} bytes; a plan is at most {MAX_PLAN_BYTES} bytes")
    data = p.read_bytes()
    if b"\0" in data:
        at = data.index(b"\0")
        raise InputError(f"{label}: a binary file (NUL byte at offset {at}), not a YAML plan")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    try:
        return yaml.load(text, Loader=_plan_loader())  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{label}: malformed YAML{at}: {problem}") from None
    except RecursionError:
        raise InputError(f"{label}: malformed YAML: nested too deeply") from None


def _unknown_keys(where: str, got: Mapping[str, Any], allowed: set[str]) -> None:
    for key in got:
        if key not in allowed:
            raise InputError(f"{where}.{key}: unknown key; valid choices: {', '.join(sorted(allowed))}".lstrip("."))


def _timeout(value: Any, where: str) -> float:
    return TIMEOUT.parse(value, where, strict=True)


def _validate_params(
    params: Any, declared: dict[str, Parameter], where: str, notebook: str, *, reserved: tuple[str, ...] = ()
) -> dict[str, Any]:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InputError(f"{where}: expected a mapping of parameter: value, got {params!r}")
    out = {}
    for key, val in params.items():
        if key in reserved:
            raise InputError(f"{where}.{key}: set by the runner, not by the plan")
        if key not in declared:
            valid = ", ".join(sorted(declared)) or "(none)"
            raise InputError(f"{where}.{key}: notebook {notebook} has no parameter {key!r}; valid choices: {valid}")
        out[key] = declared[key].type.parse(val, f"{where}.{key}", strict=True)
    return out


def _notebooks_dir(raw: Any, plan_path: Path, allow_external: bool) -> Path:
    """``notebooks_dir`` resolved: inside the project or the plan's own folder unless explicitly allowed."""
    if raw is None:
        return NOTEBOOKS_DIR
    if not isinstance(raw, str) or not raw.strip():
        raise InputError(f"notebooks_dir: expected a directory path, got {raw!r}")
    d = (plan_path.parent / raw).resolve()
    roots = (REPO, plan_path.parent.resolve())
    if not allow_external and not any(d == r or d.is_relative_to(r) for r in roots):
        raise InputError(f"notebooks_dir: {raw!r} resolves to {d}, outside the project ({REPO}) and the plan's "
                         f"folder; set {ALLOW_EXTERNAL_NOTEBOOKS_ENV}=1 to run notebooks from there")
    if not d.is_dir():
        raise InputError(f"notebooks_dir: {raw!r} is not a directory (relative to the plan file)")
    return d


def _load_nodes(nodes_raw: Any, known: list[str]) -> list[Node]:
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise InputError(f"nodes: expected a non-empty list of node entries, got {nodes_raw!r}")
    nodes: list[Node] = []
    for i, nraw in enumerate(nodes_raw):
        where = f"nodes[{i}]"
        if isinstance(nraw, str):
            nraw = {"id": nraw}
        if not isinstance(nraw, dict):
            raise InputError(f"{where}: expected a mapping with 'id', got {nraw!r}")
        _unknown_keys(where, nraw, _NODE_KEYS)
        nid = nraw.get("id")
        if not isinstance(nid, str):
            raise InputError(f"{where}.id: expected str, got {nid!r}")
        if nid not in known:
            raise InputError(f"{where}.id: unknown node {nid!r} (not in the hardware catalog); "
                             f"valid choices: {', '.join(sorted(known))}")
        if any(n.id == nid for n in nodes):
            raise InputError(f"{where}.id: node {nid!r} is listed twice")
        slurm = nraw.get("slurm") or {}
        if not isinstance(slurm, dict):
            raise InputError(f"{where}.slurm: expected a mapping, got {slurm!r}")
        local = P.Bool().parse(nraw.get("local", "slurm" not in nraw), f"{where}.local", strict=True)
        desc = P.Str(oneline=True).parse(nraw.get("description", "") or "", f"{where}.description", strict=True)
        nodes.append(Node(id=nid, local=local, slurm=dict(slurm), description=desc))
    return nodes


def _check_notebook(nb: Any, where: str, notebooks: Mapping[str, Path]) -> str:
    if not isinstance(nb, str):
        raise InputError(f"{where}: expected a notebook name, got {nb!r}")
    nb = nb.removesuffix(".py").removesuffix(".ipynb")
    if nb not in notebooks:
        raise InputError(f"{where}: unknown notebook {nb!r}; valid choices: {', '.join(sorted(notebooks)) or '(none)'}")
    return nb


def _load_entry(eraw: Any, where: str, notebooks: Mapping[str, Path], nodes: list[Node],
                default_timeout: float) -> MatrixEntry:
    if not isinstance(eraw, dict):
        raise InputError(f"{where}: expected a mapping with 'notebook', got {eraw!r}")
    _unknown_keys(where, eraw, _ENTRY_KEYS)
    nb = _check_notebook(eraw.get("notebook"), f"{where}.notebook", notebooks)
    declared = notebook_parameters(notebooks[nb])
    params = _validate_params(eraw.get("params"), declared, f"{where}.params", nb)
    grid_raw = eraw.get("grid") or {}
    if not isinstance(grid_raw, dict):
        raise InputError(f"{where}.grid: expected a mapping of parameter: [values], got {grid_raw!r}")
    grid: dict[str, list[Any]] = {}
    for key, vals in grid_raw.items():
        if not isinstance(vals, list) or not vals:
            raise InputError(f"{where}.grid.{key}: expected a non-empty list of values, got {vals!r}")
        if key in params:
            raise InputError(f"{where}.grid.{key}: also set in {where}.params")
        grid[key] = [_validate_params({key: v}, declared, f"{where}.grid", nb)[key] for v in vals]
    node_ids = [n.id for n in nodes]
    enodes = eraw.get("nodes", node_ids)
    if isinstance(enodes, str):
        enodes = [enodes]
    if not isinstance(enodes, list) or not enodes:
        raise InputError(f"{where}.nodes: expected a non-empty list of node ids, got {enodes!r}")
    for j, nid in enumerate(enodes):
        if nid not in node_ids:
            raise InputError(f"{where}.nodes[{j}]: unknown node {nid!r}; valid choices (the plan's nodes): "
                             f"{', '.join(node_ids)}")
    timeout_s = _timeout(eraw["timeout_s"], f"{where}.timeout_s") if "timeout_s" in eraw else default_timeout
    entry = MatrixEntry(notebook=nb, nodes=tuple(enodes), params=params, grid=grid, timeout_s=timeout_s)
    # every cell as its notebook will see it: workload knobs through the workload registry, sizes vs memory
    local = {n.id: n.local for n in nodes}
    keys = list(grid)
    for combo in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        cell_params = {**params, **dict(zip(keys, combo, strict=True))}
        at = f"{where}.params" if not keys else f"{where}.params (grid {dict(zip(keys, combo, strict=True))})"
        for nid in entry.nodes:
            try:
                check_cell(declared, cell_params, where=f"{where}.params", node=nid, local=local[nid])
            except InputError as exc:
                msg = str(exc)
                raise InputError(msg if not keys else f"{msg} [{at}]") from None
    return entry


def _load_report(rraw: Any, notebooks: Mapping[str, Path], default_timeout: float) -> ReportSpec:
    if isinstance(rraw, str):
        rraw = {"notebook": rraw}
    if not isinstance(rraw, dict):
        raise InputError(f"report: expected a mapping with 'notebook', got {rraw!r}")
    _unknown_keys("report", rraw, _REPORT_KEYS)
    nb = _check_notebook(rraw.get("notebook"), "report.notebook", notebooks)
    declared = notebook_parameters(notebooks[nb])
    params = _validate_params(rraw.get("params"), declared, "report.params", nb, reserved=REPORT_INJECTED)
    check_cell(declared, params, where="report.params")
    timeout_s = _timeout(rraw["timeout_s"], "report.timeout_s") if "timeout_s" in rraw else default_timeout
    return ReportSpec(notebook=nb, params=params, timeout_s=timeout_s)


def load_plan(path: str | Path, *, catalog_ids: list[str] | None = None,
              allow_external_notebooks: bool | None = None) -> Plan:
    """Read and validate a plan; raises :class:`InputError` naming ``FILE: field`` on any problem.

    Everything a cell will be given is checked here, before anything runs:
    keys, notebooks, parameter types and ranges (:mod:`hwcore.params`),
    workload knobs (the workload registry), kernel sizes against the node's
    memory, node ids (the catalog). ``notebooks_dir`` must stay inside the
    project or the plan's folder unless ``allow_external_notebooks`` (or
    ``HWEVAL_ALLOW_EXTERNAL_NOTEBOOKS=1``).
    """
    p = Path(path)
    label = str(path)
    raw = _read_yaml(p, label)
    if not isinstance(raw, dict):
        raise InputError(f"{label}: expected a mapping at the top level, got {_type_name(raw)}")
    if allow_external_notebooks is None:
        allow_external_notebooks = os.environ.get(ALLOW_EXTERNAL_NOTEBOOKS_ENV, "") == "1"
    try:
        return _build_plan(p, raw, catalog_ids, allow_external_notebooks)
    except InputError as exc:
        msg = str(exc)
        raise (exc if msg.startswith(label + ":") else InputError(f"{label}: {msg}")) from None


def _build_plan(p: Path, raw: dict[str, Any], catalog_ids: list[str] | None, allow_external: bool) -> Plan:
    _unknown_keys("", raw, _TOP_KEYS)
    name = raw.get("name", p.stem)
    if not isinstance(name, str) or not name or _SAFE.search(name):
        raise InputError(f"name: expected a non-empty name of letters, digits, '_', '-', '.', got {name!r}")
    description = P.Str(oneline=True).parse(raw.get("description", "") or "", "description", strict=True)
    notebooks_dir = _notebooks_dir(raw.get("notebooks_dir"), p, allow_external)
    notebooks = available_notebooks(notebooks_dir)

    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InputError(f"defaults: expected a mapping, got {defaults!r}")
    _unknown_keys("defaults", defaults, _DEFAULT_KEYS)
    default_timeout = _timeout(defaults["timeout_s"], "defaults.timeout_s") if "timeout_s" in defaults \
        else DEFAULT_TIMEOUT_S

    nodes = _load_nodes(raw.get("nodes"), catalog_ids if catalog_ids is not None else _catalog_ids())

    matrix_raw = raw.get("matrix")
    if not isinstance(matrix_raw, list) or not matrix_raw:
        raise InputError(f"matrix: expected a non-empty list of entries, got {matrix_raw!r}")
    entries = [_load_entry(e, f"matrix[{i}]", notebooks, nodes, default_timeout) for i, e in enumerate(matrix_raw)]

    rraw = raw.get("report")
    report = _load_report(rraw, notebooks, default_timeout) if rraw is not None else None
    from hweval.job import parse_job

    job = parse_job(raw["job"], "job").to_dict() if raw.get("job") is not None else None

    return Plan(
        path=p.resolve(),
        name=name,
        description=description,
        notebooks_dir=notebooks_dir,
        nodes=tuple(nodes),
        matrix=tuple(entries),
        report=report,
        default_timeout_s=default_timeout,
        job=job,
    )
