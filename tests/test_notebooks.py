"""Every shipped notebook executes under papermill (through the runner) with tiny parameters,
and the report it builds is one self-contained HTML file whose charts render in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from hweval.runner import cell_states
from hwcore.store import Store

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
NOTEBOOKS = ["01_node_characterization", "02_workload_benchmark", "03_scaling", "04_convergence",
             "05_procurement_report"]

TINY_PLAN = f"""\
name: tiny
notebooks_dir: {REPO / 'notebooks'}
nodes: [cpu-epyc-zen4-2c]
defaults: {{timeout_s: 240}}
matrix:
  - notebook: 01_node_characterization
    params: {{gemm_sizes: [128], gemm_dtypes: [fp32], stream_ops: [triad], stream_sizes: [65536, 1048576],
              warmup_ms: 5, measure_ms: 30}}
  - notebook: 02_workload_benchmark
    params: {{workloads_list: [mlp_regressor], max_steps: 10, max_time_s: 60}}
  - notebook: 03_scaling
    params: {{sizes_bytes: [4096, 65536, 1048576], workload: mlp_regressor, nprocs_list: [1, 2], repeats: 2,
              max_steps: 6, warmup_ms: 5, measure_ms: 30}}
  - notebook: 04_convergence
    params: {{workload: transformer_lm, target_loss: 3.4, max_steps: 40, max_time_s: 90}}
job: {{model: llama2-7b, tokens: 1.0e12, global_batch: 1024, accelerators: [256], pricing: [on_demand, spot]}}
report:
  notebook: 05_procurement_report
  params: {{candidates: [h100-sxm, mi300x]}}
"""


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """Run the tiny plan once (2 parallel notebooks); every test below inspects its outputs."""
    from conftest import run_cli

    root = tmp_path_factory.mktemp("tiny")
    plan = root / "tiny.yaml"
    plan.write_text(TINY_PLAN)
    store, out = root / "store", root / "out"
    r = run_cli("run", "--plan", str(plan), "--out", str(out), "--store", str(store), "--jobs", "2",
                "--no-progress", env={"HWEVAL_STORE": str(store)}, timeout=600)
    return {"result": r, "store": store, "out": out, "html": out / "report" / "report.html"}


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_notebook_executes(tiny_run, notebook):
    st = {v["output"].split("/")[-1].split("--")[0]: v for v in cell_states(Store(tiny_run["store"]), "tiny").values()}
    assert notebook in st, tiny_run["result"].stderr
    assert st[notebook]["status"] == "ok", st[notebook]["error"]
    nb = nbformat.read(st[notebook]["output"], as_version=4)
    assert nb.metadata["hweval"]["fingerprint"]["node_id"]
    assert not [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.slow
def test_report_is_self_contained(tiny_run):
    r = tiny_run["result"]
    assert r.returncode == 0, r.stderr
    html = tiny_run["html"]
    assert f"report: {html.resolve()}" in r.stdout
    text = html.read_text()
    assert not re.search(r"<script[^>]+src\s*=\s*['\"]?https?:", text, re.I)
    assert not re.search(r"<link[^>]+href\s*=\s*['\"]?https?:", text, re.I)
    assert "vegaEmbed(" in text and "Recommendation" in text and "Predictor vs measurement" in text
    assert "Train llama2-7b on 1T tokens on 256 x " in text
    charts = tiny_run["out"] / "report" / "charts"
    for name in ("roofline", "loss", "cost", "pareto"):
        assert (charts / f"{name}.svg").stat().st_size > 1000, name
        assert (charts / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rec = Store(tiny_run["store"]).records(kind="report")
    assert len(rec) == 1 and rec["status"].iloc[0] == "ok"


@pytest.fixture(scope="session")
def chromium():
    """Debian's chromium; installed with apt when missing and we are root; skip only if that fails."""
    if not CHROMIUM.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "chromium"], capture_output=True, timeout=600)
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium unavailable: /usr/bin/chromium missing and `apt-get install -y chromium` failed")
    return CHROMIUM


@pytest.mark.slow
@pytest.mark.browser
def test_report_renders_in_headless_chromium(tiny_run, chromium, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    shot = REPO / "out" / "test-report-screenshot.png"
    shot.parent.mkdir(exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_FLAGS[1:])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(tiny_run["html"].resolve().as_uri())
            page.wait_for_selector("svg.marks", timeout=30_000)
            page.wait_for_timeout(500)
            n_svgs = page.eval_on_selector_all("svg.marks", "els => els.length")
            n_charts = page.eval_on_selector_all("div.chart", "els => els.length")
            failed = page.eval_on_selector_all("div.chart", "els => els.filter(e => e.innerText.includes('chart failed')).length")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert n_charts >= 4 and n_svgs == n_charts and failed == 0
    assert shot.stat().st_size > 10_000


# -- parameter documentation: papermill reads every parameter of every notebook, each with its help --------------
def test_papermill_documents_every_notebook_parameter(tmp_path):
    """The generated notebooks carry a python3 kernelspec, and ``papermill.inspect_notebook`` /
    ``papermill --help-notebook`` list every annotated parameter with its help, as the plan validator does."""
    import ast
    import sys

    import jupytext
    import papermill

    from hweval.plan import notebook_parameters

    papermill_cli = Path(sys.executable).parent / "papermill"
    for name in NOTEBOOKS:
        src = REPO / "notebooks" / f"{name}.py"
        nb = jupytext.read(src)
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3", name
        ipynb = tmp_path / f"{name}.ipynb"
        jupytext.write(nb, ipynb)
        cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
        names = [n.target.id for n in ast.parse(cell.source).body if isinstance(n, ast.AnnAssign)]
        inspected = papermill.inspect_notebook(str(ipynb))
        assert list(inspected) == names, f"{name}: papermill drops {sorted(set(names) - set(inspected))}"
        for pname, p in inspected.items():
            assert p["help"], f"{name}: {pname} has no help"
        assert {k: v.help for k, v in notebook_parameters(src).items()} == {k: p["help"] for k, p in inspected.items()}
        if name != NOTEBOOKS[-1]:
            continue  # the CLI prints what inspect_notebook returns; one run of it (~10 s here) is enough
        r = subprocess.run([str(papermill_cli), "--help-notebook", str(ipynb)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        for pname, p in inspected.items():
            assert f"  {pname}: " in r.stdout and p["help"] in r.stdout, (name, pname)
