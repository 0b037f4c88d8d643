"""The layering rule (STYLE.md 11): arrows between packages only point down.

hwmodels (pure models) and hwcore (measurement core) at the bottom; kernels
and workloads above them; the application (hweval) on top. The test reads
every ``import`` statement with :mod:`ast`, including imports inside
functions, so a lazy import cannot hide an upward arrow. It also refuses
import cycles between our modules (a cycle is two modules that each need the
other, whichever layer they are in).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: package -> the packages of ours it may import (itself always allowed)
ALLOWED = {
    "hwmodels": set(),
    "hwcore": {"hwmodels"},
    "kernels": {"hwcore", "hwmodels"},
    "workloads": {"hwcore", "hwmodels"},
    "hweval": {"hwcore", "hwmodels", "kernels", "workloads"},
}
OURS = set(ALLOWED)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in OURS:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            out[_module_name(f)] = f
    return out


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours named by an import anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    pkg_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # ``from pkg import sub`` names the submodule (the caller keeps the
            # ones that are modules) and the package only for non-module names
            found.update(f"{mod}.{a.name}" for a in node.names)
            found.add(f"{mod}:" + ",".join(a.name for a in node.names))
    return {m for m in found if m.split(".")[0].split(":")[0] in OURS}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    mods = _modules()
    g = {}
    for name, path in mods.items():
        # keep only names that are modules (``from pkg import func`` names the package)
        deps = set()
        for m in _imports(name, path):
            if ":" in m:  # from pkg import a, b: the package counts unless every name is a submodule
                pkg, names = m.split(":")
                if pkg in mods and not all(f"{pkg}.{n}" in mods for n in names.split(",")):
                    deps.add(pkg)
            elif m in mods:
                deps.add(m)
        g[name] = deps - {name}
    return g


def test_no_upward_imports(graph):
    bad = []
    for mod, deps in graph.items():
        top = mod.split(".")[0]
        for d in deps:
            dtop = d.split(".")[0]
            if dtop != top and dtop not in ALLOWED[top]:
                bad.append(f"{mod} imports {d} ({top} may import only {sorted(ALLOWED[top]) or 'nothing of ours'})")
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycles(graph):
    # Tarjan-free: DFS with colours; report each cycle once
    colour: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(m: str) -> None:
        colour[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if colour.get(d, 0) == 0:
                visit(d)
            elif colour.get(d) == 1:
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
        stack.pop()
        colour[m] = 2

    for m in sorted(graph):
        if colour.get(m, 0) == 0:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_graph_sees_lazy_imports(tmp_path):
    # the reader must catch an import inside a function, not only at the top
    src = "def f():\n    from hweval import runner\n    import hwcore.store\n"
    p = ROOT / "kernels" / "_layers_probe.py"
    try:
        p.write_text(src)
        assert _imports("kernels._layers_probe", p) >= {"hweval.runner", "hwcore.store"}
    finally:
        p.unlink()
