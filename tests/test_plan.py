"""Plan loading and validation: every kind of bad plan is exit 2, one line, nothing written."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hwcore.errors import InputError
from hweval.plan import load_plan, make_cell_id, notebook_parameters, parse_parameters

NODE = "cpu-epyc-zen4-2c"

NB = '''\
# %% [markdown]
# # tiny

# %% tags=["parameters"]
batch_size: int = 8  # examples per step
lr: float = 0.1  # learning rate
name: str = "x"  # a label
sizes: list[int] = [1, 2]  # sizes
flag: bool = False  # a switch
note: Optional[str] = None  # optional

# %%
print(batch_size)
'''


@pytest.fixture
def nbdir(tmp_path: Path) -> Path:
    d = tmp_path / "nb"
    d.mkdir()
    (d / "tiny.py").write_text(NB)
    return d


def write_plan(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "x.yaml"
    p.write_text(textwrap.dedent(body))
    return p


GOOD = f"""\
name: t
notebooks_dir: nb
nodes:
  - id: {NODE}
  - id: h100-sxm
    slurm: {{partition: gpu, gres: "gpu:8", time_limit_min: 30, extra: ["--exclusive"]}}
matrix:
  - notebook: tiny
    nodes: [{NODE}]
    params: {{batch_size: 4, lr: 1, sizes: [3]}}
    grid: {{flag: [true, false]}}
    timeout_s: 30
"""


def test_parse_parameters_types_and_help():
    params = parse_parameters("a: int = 1  # the a\nb: list[str] = ['x']\n")
    assert params["a"].annotation == "int" and params["a"].default == 1 and params["a"].help == "the a"
    assert params["b"].default == ["x"]
    with pytest.raises(InputError, match="expected 'name: type = value"):
        parse_parameters("a = 1\n")
    with pytest.raises(InputError, match="expected an integer"):
        parse_parameters("a: int = 'x'\n")
    with pytest.raises(InputError, match=r"line 1: papermill cannot read parameter 'a' \(its help comment contains '='\)"):
        parse_parameters("a: int = 1  # x = y\n")
    with pytest.raises(InputError, match="papermill cannot read parameter 'a'"):
        parse_parameters("a: int | None = 1  # help\n")


def test_good_plan_cells(tmp_path, nbdir):
    plan = load_plan(write_plan(tmp_path, GOOD))
    assert plan.name == "t" and [n.id for n in plan.nodes] == [NODE, "h100-sxm"]
    assert plan.node("h100-sxm").local is False and plan.node(NODE).local is True
    assert plan.node("h100-sxm").slurm["extra"] == ["--exclusive"]  # passed through untouched
    cells = plan.cells()
    assert len(cells) == 2
    assert {c.params["flag"] for c in cells} == {True, False}
    assert all(c.params["lr"] == 1.0 and isinstance(c.params["lr"], float) for c in cells)
    assert all(c.timeout_s == 30 and c.node == NODE for c in cells)
    # stable, unique, filesystem-safe ids
    again = load_plan(write_plan(tmp_path, GOOD)).cells()
    assert [c.cell_id for c in cells] == [c.cell_id for c in again]
    assert len({c.cell_id for c in cells}) == 2
    assert all("/" not in c.cell_id and " " not in c.cell_id for c in cells)
    assert make_cell_id(NODE, "tiny", {"a": 1}) != make_cell_id(NODE, "tiny", {"a": 2})
    assert plan.cell(cells[0].cell_id) == cells[0]


BAD = {
    "malformed yaml": ("nodes: [a\nmatrix: {", "malformed YAML"),
    "unknown top key": (GOOD + "extra: 1\n", "extra: unknown key"),
    "unknown notebook": (GOOD.replace("notebook: tiny", "notebook: nope"), "matrix[0].notebook: unknown notebook 'nope'; valid choices: tiny"),
    "unknown parameter": (GOOD.replace("lr: 1", "lr: 1, bogus: 3"), "matrix[0].params.bogus: notebook tiny has no parameter 'bogus'"),
    "wrong type": (GOOD.replace("batch_size: 4", "batch_size: abc"), "matrix[0].params.batch_size: expected an integer, got 'abc'"),
    "wrong list item": (GOOD.replace("sizes: [3]", "sizes: [3, x]"), "matrix[0].params.sizes[1]: expected an integer, got 'x'"),
    "wrong grid type": (GOOD.replace("flag: [true, false]", "flag: [true, 3]"), "matrix[0].grid.flag: expected a boolean (true/false), got 3"),
    "unknown catalog node": (GOOD.replace("id: h100-sxm", "id: h100-fake"), "nodes[1].id: unknown node 'h100-fake'"),
    "node not in plan": (GOOD.replace(f"nodes: [{NODE}]", "nodes: [mi300x]"), "matrix[0].nodes[0]: unknown node 'mi300x'"),
    "bad timeout": (GOOD.replace("timeout_s: 30", "timeout_s: -1"), "matrix[0].timeout_s: expected a number of seconds in (0, 604800]"),
    "no matrix": ("nodes: [cpu-epyc-zen4-2c]\n", "matrix: expected a non-empty list"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plans_exit_2_and_write_nothing(case, tmp_path, nbdir, cli, store_path):
    body, fragment = BAD[case]
    plan = write_plan(tmp_path, body)
    out = tmp_path / "out"
    r = cli("run", "--plan", str(plan), "--out", str(out), "--store", str(store_path), "--no-progress")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert str(plan) in lines[0] and fragment in lines[0], lines[0]
    assert not out.exists()
    assert not any(store_path.iterdir())


def test_missing_plan_file(tmp_path, cli):
    r = cli("run", "--plan", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr


def test_shipped_plans_validate():
    repo = Path(__file__).resolve().parent.parent
    for name in ("quick", "procurement"):
        plan = load_plan(repo / "plans" / f"{name}.yaml")
        assert plan.cells(), name
        assert plan.report is not None
        assert plan.report_cell() is not None


def test_shipped_notebooks_declare_typed_parameters():
    repo = Path(__file__).resolve().parent.parent
    nbs = sorted((repo / "notebooks").glob("0*.py"))
    assert [p.stem[:2] for p in nbs] == ["01", "02", "03", "04", "05"]
    for p in nbs:
        params = notebook_parameters(p)
        assert params, p
        for prm in params.values():
            assert prm.help, f"{p.name}: {prm.name} has no help comment"


def test_shipped_notebook_parameters_have_suite_types():
    """Every parameter of the shipped notebooks has a vocabulary type (the registries' ranges) its default fits."""
    from hweval.notebook_params import vocabulary

    repo = Path(__file__).resolve().parent.parent
    for p in sorted((repo / "notebooks").glob("0*.py")):
        for prm in notebook_parameters(p).values():
            t = vocabulary(prm.name)
            assert t is not None, f"{p.name}: {prm.name} has no type in hweval.notebook_params.VOCABULARY"
            t.parse(prm.default, f"{p.name}: {prm.name}", strict=True)


def test_nested_workload_knobs_fail_like_the_registry(tmp_path):
    """A plan's nested workload parameter gets the registry's own error, prefixed with the plan field."""
    from workloads import registry

    p = write_plan(tmp_path, f"""\
        nodes: [{NODE}]
        matrix:
          - notebook: 03_scaling
            params: {{workload: mlp_regressor, workload_params: {{batch_size: abc, bogus_key: 1}}}}
        """)
    with pytest.raises(InputError) as exc:
        load_plan(p)
    assert str(exc.value) == f"{p}: matrix[0].params.workload_params.batch_size: expected a positive integer, got 'abc'"
    with pytest.raises(InputError) as api:
        registry.config_from_params("mlp_regressor", {"batch_size": "abc"})
    assert str(exc.value).endswith(str(api.value).removeprefix("mlp_regressor"))


def test_notebooks_dir_is_confined_unless_allowed(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "tiny.py").write_text(NB)
    plans = tmp_path / "plans"
    plans.mkdir()
    p = plans / "x.yaml"
    p.write_text(f"notebooks_dir: ../elsewhere\nnodes: [{NODE}]\nmatrix: [{{notebook: tiny}}]\n")
    with pytest.raises(InputError, match=r"notebooks_dir: '../elsewhere' resolves to .*outside the project"):
        load_plan(p)
    assert load_plan(p, allow_external_notebooks=True).cells()
    monkeypatch.setenv("HWEVAL_ALLOW_EXTERNAL_NOTEBOOKS", "1")
    assert load_plan(p).cells()


def test_yaml_aliases_and_binary_files_are_one_line(tmp_path):
    p = tmp_path / "a.yaml"
    p.write_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(InputError, match=r"malformed YAML at line 2, column 4: YAML alias \*x is not allowed"):
        load_plan(p)
    p.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(InputError, match=r"not UTF-8 text \(byte 0xff at offset 6\)"):
        load_plan(p)
    p.write_bytes(b"\x00\x01")
    with pytest.raises(InputError, match="a binary file"):
        load_plan(p)


def test_catalog_ids_follow_the_cells_own_catalog_dir(tmp_path):
    """measured_node / candidates name nodes of the catalog the cell reads (its catalog_dir), not only the default."""
    repo = Path(__file__).resolve().parent.parent
    cat = tmp_path / "cat"
    cat.mkdir()
    src = (repo / "data/catalog/h100-sxm.toml").read_text()
    (cat / "my-h100.toml").write_text(src.replace('id = "h100-sxm"', 'id = "my-h100"'))
    body = f"""\
        nodes: [{NODE}]
        matrix:
          - notebook: 04_convergence
        report:
          notebook: 05_procurement_report
          params: {{catalog_dir: {cat}, measured_node: "", candidates: [my-h100]}}
        """
    plan = load_plan(write_plan(tmp_path, body))
    assert plan.report.params["candidates"] == ["my-h100"]
    # the same id against the default catalog: one line naming the field and the valid ids
    with pytest.raises(InputError, match=r"report\.params\.candidates\[0\]: unknown value 'my-h100'; valid choices: .*h100-sxm"):
        load_plan(write_plan(tmp_path, body.replace(f"catalog_dir: {cat}, ", "")))
    # and an id the custom catalog lacks
    with pytest.raises(InputError, match=r"report\.params\.candidates\[0\]: unknown value 'h100-sxm'; valid choices: my-h100"):
        load_plan(write_plan(tmp_path, body.replace("[my-h100]", "[h100-sxm]")))
    with pytest.raises(InputError, match=r"report\.params\.catalog_dir"):
        load_plan(write_plan(tmp_path, body.replace(str(cat), str(tmp_path / "missing"))))
