"""Batch runner: failures, kills and hangs are recorded, the rest finishes, --resume completes."""

from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
import pytest

from hweval.plan import load_plan
from hweval.runner import cell_states, main as runner_main, select_cells
from hwcore.store import Store

NODE = "cpu-epyc-zen4-2c"

NOTEBOOKS = {
    "ok": '''
        # %% tags=["parameters"]
        n: int = 1  # a number

        # %%
        from hwcore.store import Record, Store
        Store().append(Record(kind="other", name="ok-nb", metrics={"n": n}))
    ''',
    "raises": '''
        # %% tags=["parameters"]
        marker: str = ""  # raise unless this file exists

        # %%
        import os
        if not os.path.exists(marker):
            raise RuntimeError("injected failure")
    ''',
    "killme": '''
        # %% tags=["parameters"]
        marker: str = ""  # SIGKILL the kernel unless this file exists

        # %%
        import os, signal
        if not os.path.exists(marker):
            os.kill(os.getpid(), signal.SIGKILL)
    ''',
    "hang": '''
        # %% tags=["parameters"]
        marker: str = ""  # hang unless this file exists

        # %%
        import os, time
        while not os.path.exists(marker):
            time.sleep(0.2)
    ''',
    "rep": '''
        # %% tags=["parameters"]
        plan_name: str = ""  # injected by the runner
        report_dir: str = "out/report"  # injected by the runner

        # %%
        import os
        from hwcore.store import Store
        n = len(Store().records(plan=plan_name, kind="notebook"))
        os.makedirs(report_dir, exist_ok=True)
        open(os.path.join(report_dir, "report.html"), "w").write(f"<html>{n} notebook records</html>")
    ''',
}


@pytest.fixture
def batch(tmp_path: Path):
    nb = tmp_path / "nb"
    nb.mkdir()
    for name, src in NOTEBOOKS.items():
        (nb / f"{name}.py").write_text(textwrap.dedent(src).lstrip())
    marker = tmp_path / "marker"
    plan = tmp_path / "batch.yaml"
    plan.write_text(textwrap.dedent(f"""\
        name: batch
        notebooks_dir: nb
        nodes: [{NODE}]
        defaults: {{timeout_s: 300}}
        matrix:
          - notebook: ok
            params: {{n: 1}}
          - notebook: raises
            params: {{marker: "{marker}"}}
          - notebook: killme
            params: {{marker: "{marker}"}}
          - notebook: hang
            params: {{marker: "{marker}"}}
            timeout_s: 6
        report:
          notebook: rep
        """))
    return plan, marker, tmp_path / "out"


@pytest.mark.slow
def test_batch_failures_resume_noop_force(batch, cli, store_path):
    plan, marker, out = batch
    args = ("run", "--plan", str(plan), "--out", str(out), "--store", str(store_path), "--jobs", "2", "--no-progress")
    r = cli(*args)
    assert r.returncode == 1, r.stderr
    st = cell_states(Store(store_path), "batch")
    by_nb = {}
    for cid, s in st.items():
        by_nb.setdefault(cid.split("--")[0], []).append(s)
    assert [s["status"] for s in by_nb["ok"]] == ["ok"]
    assert by_nb["raises"][0]["status"] == "failed" and "injected failure" in by_nb["raises"][0]["error"]
    assert by_nb["killme"][0]["status"] == "failed" and "kernel died" in by_nb["killme"][0]["error"]
    assert by_nb["hang"][0]["status"] == "timeout"
    # the report still got built after the failures
    html = out / "report" / "report.html"
    assert html.exists() and f"report: {html.resolve()}" in r.stdout
    # executed notebooks keep parameters and the fingerprint in their metadata
    okc = [c for c in load_plan(plan).cells() if c.notebook == "ok"][0]
    nb = nbformat.read(Path(st[okc.cell_id]["output"]), as_version=4)
    assert nb.metadata["hweval"]["parameters"] == okc.params
    assert nb.metadata["hweval"]["fingerprint"]["node_id"]
    assert nb.metadata["papermill"]["parameters"] == okc.params
    # the notebook's own records are tagged with plan, run and notebook
    rec = Store(store_path).records(name="ok-nb")
    assert set(rec["plan"]) == {"batch"} and set(rec["notebook"]) == {"ok"}
    assert set(rec["run_id"]) == {st[okc.cell_id]["run_id"]}

    # a plain rerun does not retry failures
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert "use --resume" in r.stderr
    # --resume re-runs exactly the three failed cells, which now succeed; the hang cell must now succeed too,
    # so it gets the generous timeout (6 s only ever applied to the cell meant to hang; cell ids do not
    # depend on timeouts)
    marker.write_text("")
    plan.write_text(plan.read_text().replace("timeout_s: 6\n", "timeout_s: 300\n"))
    assert "timeout_s: 6\n" not in plan.read_text()
    n_before = len(Store(store_path).records(kind="notebook"))
    r = cli(*args, "--resume")
    assert r.returncode == 0, r.stderr
    st = cell_states(Store(store_path), "batch")
    assert {s["status"] for s in st.values()} == {"ok"} and len(st) == 5  # 4 cells + report
    assert len(Store(store_path).records(kind="notebook")) == n_before + 4  # 3 cells + report
    assert len(Store(store_path).records(name="ok-nb")) == 1  # the ok cell is not re-run

    # finished plan: no-op, still prints the report
    r = cli(*args)
    assert r.returncode == 0 and "nothing to do" in r.stderr and "report:" in r.stdout
    assert len(Store(store_path).records(kind="notebook")) == n_before + 4
    # the report's inputs changed since it was built (a price, the validation file, the predictor): no cell
    # re-runs, the report is rebuilt, and the next run finds nothing to do again
    digest = out / "report" / ".inputs.sha256"
    assert digest.is_file() and len(digest.read_text().strip()) == 64
    digest.write_text("0" * 64 + "\n")
    r = cli(*args)
    assert r.returncode == 0 and "report's inputs changed" in r.stderr and "nothing to do" not in r.stderr
    assert len(Store(store_path).records(kind="notebook")) == n_before + 5  # the report notebook only
    assert len(Store(store_path).records(name="ok-nb")) == 1
    r = cli(*args)
    assert r.returncode == 0 and "nothing to do" in r.stderr
    # --force re-runs everything
    r = cli(*args, "--force")
    assert r.returncode == 0, r.stderr
    assert len(Store(store_path).records(name="ok-nb")) == 2


def test_select_cells_rules(batch):
    plan, _, _ = batch
    cells = load_plan(plan).cells()
    a, b, c = cells[:3]
    states = {a.cell_id: {"status": "ok"}, b.cell_id: {"status": "timeout"}}
    todo, kept = select_cells(cells[:3], states)
    assert todo == [c] and kept["done"] == [a] and kept["failed"] == [b]
    todo, _ = select_cells(cells[:3], states, resume=True)
    assert todo == [b, c]
    todo, _ = select_cells(cells[:3], states, force=True)
    assert todo == [a, b, c]


def test_module_entry_runs_one_cell(batch, store_path, tmp_path, capsys):
    plan, _, _ = batch
    cell = [c for c in load_plan(plan).cells() if c.notebook == "ok"][0]
    rc = runner_main(["--plan", str(plan), "--cell", cell.cell_id, "--out", str(tmp_path / "o"),
                      "--store", str(store_path), "--run-id", "job-1"])
    assert rc == 0
    st = cell_states(Store(store_path), "batch")[cell.cell_id]
    assert st["status"] == "ok" and st["run_id"] == "job-1"
    assert (tmp_path / "o" / f"{cell.cell_id}.ipynb").exists()
    assert runner_main(["--plan", str(plan), "--cell", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "no cell 'nope'" in capsys.readouterr().err


def test_slurm_backend_missing_is_input_error(batch, store_path, monkeypatch, capsys):
    """Without hweval.slurm, --backend slurm is one clear line, exit 2, nothing written (simulated here)."""
    import importlib.util

    from hweval.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hweval.slurm" else real(name, *a))
    plan, _, out = batch
    rc = main(["run", "--plan", str(plan), "--out", str(out), "--store", str(store_path), "--backend", "slurm"])
    err = capsys.readouterr().err
    assert rc == 2 and "hweval.slurm" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not any(store_path.iterdir())


def test_run_plan_library_call(batch, store_path, tmp_path):
    """hweval.execute.run_plan is what `hweval run` does, as a call returning a RunOutcome."""
    from hweval.execute import run_plan
    from hwcore.errors import InputError

    plan, _, out = batch
    logged: list[str] = []
    dry = run_plan(plan, out=out, store=store_path, dry_run=True, log=logged.append)
    assert dry.dry_run and [w for w, _ in dry.listing] == ["run"] * 4 and dry.ok
    assert dry.report_html == (out / "report" / "report.html").resolve() and not out.exists()
    with pytest.raises(InputError, match="--jobs"):
        run_plan(plan, out=out, store=store_path, jobs=0)
    with pytest.raises(InputError, match="--backend"):
        run_plan(plan, out=out, store=store_path, backend="k8s")
    one = tmp_path / "one.yaml"
    one.write_text(plan.read_text().split("  - notebook: raises")[0].replace("name: batch", "name: one"))
    res = run_plan(one, out=out, store=store_path, progress=False, log=logged.append)
    assert res.ok and list(res.statuses.values()) == ["ok"] and res.report_status is None
    assert any("1 cell(s) to run" in m for m in logged)
    again = run_plan(one, out=out, store=store_path, progress=False)
    assert again.nothing_to_do and again.kept["done"] == list(res.statuses)


def test_worker_waits_for_a_slow_kernel_up_to_the_cells_limit(tmp_path, monkeypatch):
    """papermill's 60 s kernel-start default failed CI on a loaded machine; the worker waits up to the cell's own
    limit (capped at KERNEL_START_TIMEOUT_S)."""
    import json

    import papermill as pm

    from hweval import runner

    nb = tmp_path / "nb.py"
    nb.write_text("# %%\nx = 1\n")
    seen = {}
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **kw: seen.update(kw))
    cap = int(runner.KERNEL_START_TIMEOUT_S)
    for limit, want in ((240, 240), (3600, cap), (None, cap)):
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps({"cell": {"notebook_path": str(nb), "params": {}, "timeout_s": limit},
                                    "output": str(tmp_path / "out.ipynb"), "result": str(tmp_path / "res.json")}))
        monkeypatch.delenv(runner.PARENT_ENV, raising=False)
        assert runner._worker(str(spec)) == 0
        assert seen["start_timeout"] == want
        assert json.loads((tmp_path / "res.json").read_text())["status"] == "ok"


def test_worker_retries_a_kernel_that_died_at_start_up(tmp_path, monkeypatch, capfd):
    """jupyter_client's port race (nteract/papermill#511) failed CI once with --jobs 2: "Kernel died before
    replying to kernel_info" on a cell whose notebook never ran. The worker launches a new kernel, up to
    KERNEL_START_ATTEMPTS times; any other failure is not retried."""
    import json

    import papermill as pm

    from hweval import runner

    monkeypatch.setattr(runner.time, "sleep", lambda s: None)
    nb = tmp_path / "nb.py"
    nb.write_text("# %%\nx = 1\n")
    spec = tmp_path / "spec.json"
    res = tmp_path / "res.json"
    spec.write_text(json.dumps({"cell": {"notebook_path": str(nb), "params": {}, "timeout_s": 60},
                                "output": str(tmp_path / "out.ipynb"), "result": str(res)}))
    monkeypatch.delenv(runner.PARENT_ENV, raising=False)

    def fails(n_failures, exc):
        calls = []

        def execute(*a, **kw):
            calls.append(kw)
            if len(calls) <= n_failures:
                raise exc
        return calls, execute

    died = RuntimeError("Kernel died before replying to kernel_info")
    calls, execute = fails(runner.KERNEL_START_ATTEMPTS - 1, died)
    monkeypatch.setattr(pm, "execute_notebook", execute)
    assert runner._worker(str(spec)) == 0
    assert len(calls) == runner.KERNEL_START_ATTEMPTS
    assert json.loads(res.read_text()) == {"status": "ok", "error": None}
    assert "kernel died at start-up (attempt 1 of" in capfd.readouterr().err

    calls, execute = fails(99, died)
    monkeypatch.setattr(pm, "execute_notebook", execute)
    assert runner._worker(str(spec)) == 0
    assert len(calls) == runner.KERNEL_START_ATTEMPTS
    got = json.loads(res.read_text())
    assert got["status"] == "failed" and got["error"].startswith(
        f"kernel died at start-up {runner.KERNEL_START_ATTEMPTS} times: RuntimeError: Kernel died before")

    # a kernel that stops answering, or any other error, is not retried
    for exc in (RuntimeError("Kernel didn't respond in 60 seconds"), ValueError("bad")):
        calls, execute = fails(99, exc)
        monkeypatch.setattr(pm, "execute_notebook", execute)
        assert runner._worker(str(spec)) == 0
        assert len(calls) == 1 and json.loads(res.read_text())["status"] == "failed"


def test_report_inputs_digest_follows_the_catalog_the_report_prices_with(tmp_path, monkeypatch):
    """The digest beside a report covers the catalog it prices with (HWMODELS_CATALOG or the repository's): a
    changed price changes it, so the next run rebuilds the report; the same inputs give the same digest."""
    import shutil

    from hwmodels.catalog import default_dir
    from hweval.execute import report_inputs_digest
    from hweval.plan import Cell

    cat = tmp_path / "catalog"
    shutil.copytree(default_dir(), cat)
    monkeypatch.setenv("HWMODELS_CATALOG", str(cat))
    nb = tmp_path / "r.py"
    nb.write_text("# report\n")
    cell = Cell(cell_id="report-x", node="cpu-epyc-zen4-2c", notebook="r", notebook_path=str(nb), params={"a": 1},
                timeout_s=60.0, local=True, slurm={}, is_report=True)
    a = report_inputs_digest(cell)
    assert a == report_inputs_digest(cell)
    h100 = cat / "h100-sxm.toml"
    h100.write_text(h100.read_text() + "\n# re-quoted\n")
    b = report_inputs_digest(cell)
    assert b != a
    nb.write_text("# report, edited\n")
    assert report_inputs_digest(cell) != b
