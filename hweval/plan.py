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

:meth:`Plan.cells` expands the matrix into :class:`Cell` objects whose
``cell_id`` is a stable, filesystem-safe hash of node + notebook + parameters.
"""

from __future__ import annotations

import ast
import hashlib
import io
import itertools
import json
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hwcore.errors import InputError

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO / "notebooks"
DEFAULT_TIMEOUT_S = 1800.0
#: Parameters the runner injects into the report notebook (when it declares them).
REPORT_INJECTED = ("plan_name", "report_dir")

_TOP_KEYS = {"name", "description", "notebooks_dir", "defaults", "nodes", "matrix", "report"}
_DEFAULT_KEYS = {"timeout_s"}
_NODE_KEYS = {"id", "local", "slurm", "description"}
_ENTRY_KEYS = {"notebook", "nodes", "params", "grid", "timeout_s"}
_REPORT_KEYS = {"notebook", "params", "timeout_s"}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- notebook parameters ------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Parameter:
    """One entry of a notebook's ``parameters`` cell: ``name: type = default  # help``."""

    name: str
    annotation: str
    default: Any
    help: str = ""


def _comments_by_line(src: str) -> dict[int, str]:
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string.lstrip("#").strip()
    except (tokenize.TokenError, IndentationError):
        pass
    return out


def parse_parameters(source: str, *, where: str = "parameters cell") -> dict[str, Parameter]:
    """Parse the source of a ``parameters`` cell into ``{name: Parameter}``.

    Every statement must be an annotated assignment of a literal
    (``batch_size: int = 8  # help``), so papermill can override it and the
    plan validator can type-check overrides against the annotation.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"{where}: syntax error at line {exc.lineno}: {exc.msg}") from exc
    comments = _comments_by_line(source)
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
        annotation = ast.unparse(node.annotation)
        _check_value(default, annotation, f"{where}: {name}")  # the default must fit its own type
        params[name] = Parameter(name=name, annotation=annotation, default=default, help=comments.get(node.lineno, ""))
    return params


@lru_cache(maxsize=64)
def _notebook_parameters_cached(path: str, mtime_ns: int) -> dict[str, Parameter]:
    import jupytext

    try:
        nb = jupytext.read(path)
    except Exception as exc:  # noqa: BLE001 - any parse failure is bad input
        raise InputError(f"{path}: cannot read notebook: {exc}") from exc
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise InputError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    return parse_parameters(cells[0].source, where=f"{path}: parameters cell")


def notebook_parameters(path: str | Path) -> dict[str, Parameter]:
    """The declared parameters of a jupytext notebook (``.py`` percent script or ``.ipynb``)."""
    p = Path(path)
    return _notebook_parameters_cached(str(p), p.stat().st_mtime_ns)


def available_notebooks(notebooks_dir: Path) -> dict[str, Path]:
    """``{name: path}`` of the jupytext scripts in ``notebooks_dir`` (``01_x.py`` -> ``01_x``)."""
    if not notebooks_dir.is_dir():
        return {}
    return {p.stem: p for p in sorted(notebooks_dir.glob("*.py")) if not p.name.startswith("_")}


# -- type checking against annotations --------------------------------------------------
def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_value(value: Any, annotation: str, field: str) -> Any:
    """Check ``value`` against a simple annotation (int, float, str, bool, list[T], dict[str, T], T | None)."""
    try:
        ann = ast.parse(annotation, mode="eval").body
    except SyntaxError as exc:
        raise InputError(f"{field}: cannot parse annotation {annotation!r}") from exc
    return _check(value, ann, field)


def _fail(field: str, expected: str, value: Any) -> InputError:
    return InputError(f"{field}: expected {expected}, got {value!r}")


def _check(value: Any, ann: ast.expr, field: str) -> Any:
    text = ast.unparse(ann)
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        options = []

        def flatten(a: ast.expr) -> None:
            if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):
                flatten(a.left)
                flatten(a.right)
            else:
                options.append(a)

        flatten(ann)
        for opt in options:
            try:
                return _check(value, opt, field)
            except InputError:
                continue
        raise _fail(field, text, value)
    if isinstance(ann, ast.Constant) and ann.value is None:
        if value is None:
            return None
        raise _fail(field, "None", value)
    if isinstance(ann, ast.Name):
        name = ann.id
        if name == "Any" or name == "object":
            return value
        if name == "None":
            if value is None:
                return None
            raise _fail(field, "None", value)
        if name == "bool":
            if isinstance(value, bool):
                return value
            raise _fail(field, "bool", value)
        if name == "int":
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise _fail(field, "int", value)
        if name == "float":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
            raise _fail(field, "float", value)
        if name == "str":
            if isinstance(value, str):
                return value
            raise _fail(field, "str", value)
        if name in ("list", "tuple"):
            if isinstance(value, list | tuple):
                return list(value)
            raise _fail(field, "list", value)
        if name == "dict":
            if isinstance(value, dict):
                return dict(value)
            raise _fail(field, "dict", value)
        raise InputError(f"{field}: unsupported parameter annotation {text!r}")
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name):
        outer = ann.value.id
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if outer in ("list", "tuple"):
            if not isinstance(value, list | tuple):
                raise _fail(field, text, value)
            item = args[0]
            return [_check(v, item, f"{field}[{i}]") for i, v in enumerate(value)]
        if outer == "dict":
            if not isinstance(value, dict):
                raise _fail(field, text, value)
            vt = args[1] if len(args) > 1 else ast.Name(id="Any")
            return {str(k): _check(v, vt, f"{field}.{k}") for k, v in value.items()}
        if outer == "Optional":
            return None if value is None else _check(value, args[0], field)
    raise InputError(f"{field}: unsupported parameter annotation {text!r}")


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
def _catalog_ids() -> list[str]:
    from hwmodels.catalog import default_catalog

    try:
        return list(default_catalog().ids())
    except ValueError as exc:  # hwmodels.errors.ModelInputError: a malformed catalog file
        raise InputError(f"catalog: {exc}") from exc


def _unknown_keys(where: str, got: Mapping[str, Any], allowed: set[str]) -> None:
    for key in got:
        if key not in allowed:
            raise InputError(f"{where}.{key}: unknown key; valid choices: {', '.join(sorted(allowed))}".lstrip("."))


def _timeout(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise InputError(f"{where}: expected a positive number of seconds, got {value!r}")
    return float(value)


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
        out[key] = _check_value(val, declared[key].annotation, f"{where}.{key}")
    return out


def load_plan(path: str | Path, *, catalog_ids: list[str] | None = None) -> Plan:
    """Read and validate a plan; raises :class:`InputError` naming ``FILE: field`` on any problem."""
    import yaml

    p = Path(path)
    label = str(path)
    if not p.is_file():
        raise InputError(f"--plan: {label}: no such file")
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{label}: malformed YAML{at}: {problem}") from exc
    if not isinstance(raw, dict):
        raise InputError(f"{label}: expected a mapping at the top level, got {_type_name(raw)}")

    def err(msg: str) -> InputError:
        return InputError(f"{label}: {msg}")

    try:
        _unknown_keys("", raw, _TOP_KEYS)
    except InputError as exc:
        raise err(str(exc)) from exc

    name = raw.get("name", p.stem)
    if not isinstance(name, str) or not name or _SAFE.search(name):
        raise err(f"name: expected a non-empty name of letters, digits, '_', '-', '.', got {name!r}")
    description = raw.get("description", "") or ""
    if not isinstance(description, str):
        raise err(f"description: expected str, got {description!r}")

    nb_dir_raw = raw.get("notebooks_dir")
    if nb_dir_raw is None:
        notebooks_dir = NOTEBOOKS_DIR
    else:
        if not isinstance(nb_dir_raw, str):
            raise err(f"notebooks_dir: expected str, got {nb_dir_raw!r}")
        notebooks_dir = (p.parent / nb_dir_raw).resolve()
        if not notebooks_dir.is_dir():
            raise err(f"notebooks_dir: {nb_dir_raw!r} is not a directory (relative to the plan file)")
    notebooks = available_notebooks(notebooks_dir)

    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise err(f"defaults: expected a mapping, got {defaults!r}")
    try:
        _unknown_keys("defaults", defaults, _DEFAULT_KEYS)
    except InputError as exc:
        raise err(str(exc)) from exc
    default_timeout = _timeout(defaults["timeout_s"], f"{label}: defaults.timeout_s") if "timeout_s" in defaults else DEFAULT_TIMEOUT_S

    # nodes
    nodes_raw = raw.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise err(f"nodes: expected a non-empty list of node entries, got {nodes_raw!r}")
    known = catalog_ids if catalog_ids is not None else _catalog_ids()
    nodes: list[Node] = []
    for i, nraw in enumerate(nodes_raw):
        where = f"nodes[{i}]"
        if isinstance(nraw, str):
            nraw = {"id": nraw}
        if not isinstance(nraw, dict):
            raise err(f"{where}: expected a mapping with 'id', got {nraw!r}")
        try:
            _unknown_keys(where, nraw, _NODE_KEYS)
        except InputError as exc:
            raise err(str(exc)) from exc
        nid = nraw.get("id")
        if not isinstance(nid, str):
            raise err(f"{where}.id: expected str, got {nid!r}")
        if nid not in known:
            raise err(f"{where}.id: unknown node {nid!r} (not in the hardware catalog); valid choices: {', '.join(sorted(known))}")
        if any(n.id == nid for n in nodes):
            raise err(f"{where}.id: node {nid!r} is listed twice")
        slurm = nraw.get("slurm") or {}
        if not isinstance(slurm, dict):
            raise err(f"{where}.slurm: expected a mapping, got {slurm!r}")
        local = nraw.get("local", "slurm" not in nraw)
        if not isinstance(local, bool):
            raise err(f"{where}.local: expected bool, got {local!r}")
        desc = nraw.get("description", "") or ""
        nodes.append(Node(id=nid, local=local, slurm=dict(slurm), description=str(desc)))
    node_ids = [n.id for n in nodes]

    def check_notebook(nb: Any, where: str) -> str:
        if not isinstance(nb, str):
            raise err(f"{where}: expected a notebook name, got {nb!r}")
        nb = nb.removesuffix(".py").removesuffix(".ipynb")
        if nb not in notebooks:
            raise err(f"{where}: unknown notebook {nb!r}; valid choices: {', '.join(sorted(notebooks)) or '(none)'}")
        return nb

    # matrix
    matrix_raw = raw.get("matrix")
    if not isinstance(matrix_raw, list) or not matrix_raw:
        raise err(f"matrix: expected a non-empty list of entries, got {matrix_raw!r}")
    entries: list[MatrixEntry] = []
    for i, eraw in enumerate(matrix_raw):
        where = f"matrix[{i}]"
        if not isinstance(eraw, dict):
            raise err(f"{where}: expected a mapping with 'notebook', got {eraw!r}")
        try:
            _unknown_keys(where, eraw, _ENTRY_KEYS)
            nb = check_notebook(eraw.get("notebook"), f"{where}.notebook")
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
                grid[key] = [
                    _validate_params({key: v}, declared, f"{where}.grid", nb)[key] for v in vals
                ]
            enodes = eraw.get("nodes", node_ids)
            if isinstance(enodes, str):
                enodes = [enodes]
            if not isinstance(enodes, list) or not enodes:
                raise InputError(f"{where}.nodes: expected a non-empty list of node ids, got {enodes!r}")
            for j, nid in enumerate(enodes):
                if nid not in node_ids:
                    raise InputError(
                        f"{where}.nodes[{j}]: unknown node {nid!r}; valid choices (the plan's nodes): {', '.join(node_ids)}"
                    )
            timeout_s = _timeout(eraw["timeout_s"], f"{where}.timeout_s") if "timeout_s" in eraw else default_timeout
        except InputError as exc:
            msg = str(exc)
            raise (exc if msg.startswith(label + ":") else err(msg)) from None
        entries.append(MatrixEntry(notebook=nb, nodes=tuple(enodes), params=params, grid=grid, timeout_s=timeout_s))

    # report
    report = None
    rraw = raw.get("report")
    if rraw is not None:
        if isinstance(rraw, str):
            rraw = {"notebook": rraw}
        if not isinstance(rraw, dict):
            raise err(f"report: expected a mapping with 'notebook', got {rraw!r}")
        try:
            _unknown_keys("report", rraw, _REPORT_KEYS)
            nb = check_notebook(rraw.get("notebook"), "report.notebook")
            declared = notebook_parameters(notebooks[nb])
            params = _validate_params(rraw.get("params"), declared, "report.params", nb, reserved=REPORT_INJECTED)
            timeout_s = _timeout(rraw["timeout_s"], "report.timeout_s") if "timeout_s" in rraw else default_timeout
        except InputError as exc:
            msg = str(exc)
            raise (exc if msg.startswith(label + ":") else err(msg)) from None
        report = ReportSpec(notebook=nb, params=params, timeout_s=timeout_s)

    return Plan(
        path=p.resolve(),
        name=name,
        description=description,
        notebooks_dir=notebooks_dir,
        nodes=tuple(nodes),
        matrix=tuple(entries),
        report=report,
        default_timeout_s=default_timeout,
    )
