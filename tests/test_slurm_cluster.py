"""``hweval run --backend slurm`` against a real single-node Slurm (started here, stopped after).

The cluster comes from ``tests/slurm_cluster.py`` (apt-installs Slurm when
missing and root; skips with the reason otherwise). Plans are tiny, made for
the test, and use the notebooks in ``tests/slurm/notebooks``; every run goes
through the real path: CLI -> hweval.slurm.run_plan -> sbatch job array ->
``python -m hweval.runner`` -> papermill -> store. The time-limit case needs
Slurm's one-minute ``--time`` granularity (about 65 s), so it is submitted
first in the background and checked last.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, install

from hwcore.store import Store, decode

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "tests" / "slurm" / "notebooks"

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.timeout(400)]


def _node_id() -> str:
    from hwmodels.catalog import default_catalog

    ids = list(default_catalog().ids())
    cpu = [i for i in ids if "cpu" in i]
    return (cpu or ids)[0]


@pytest.fixture(scope="module")
def cluster():
    why = install()
    if why:
        pytest.skip(f"no Slurm for the Slurm tests: {why}")
    c = SlurmCluster()
    c.start()
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    try:
        yield c
    finally:
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        c.stop()


def where(cluster, **more) -> dict:
    """The node entry's slurm mapping for this cluster (its partition, when one is named)."""
    return {**({"partition": cluster.partition} if cluster.partition else {}), **more}


def write_plan(path: Path, name: str, slurm: dict, matrix: list[dict], timeout_s: float = 300) -> Path:
    import yaml

    plan = {
        "name": name,
        "notebooks_dir": str(NOTEBOOKS),
        "defaults": {"timeout_s": timeout_s},
        "nodes": [{"id": _node_id(), "slurm": slurm}],
        "matrix": matrix,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(plan))
    return path


def hweval(*args: str, env: dict | None = None, background: bool = False, timeout: float = 300):
    full = dict(os.environ, HWEVAL_SLURM_POLL_S="0.5", HWEVAL_SLURM_RECORD_GRACE_S="2")
    full.update(env or {})
    cmd = [sys.executable, "-m", "hweval", *args]
    if background:
        # SIGINT back to its default in the child: a suite started in the background of a non-interactive shell
        # (nohup, `cmd &`) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so
        # the Ctrl-C test's signal would do nothing (seen: /proc/<pid>/status SigIgn had SIGINT set)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full, cwd=REPO,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=REPO, timeout=timeout)


def notebook_records(store: Path):
    df = Store(store).query("select * from results where kind = 'notebook' order by finished_at")
    return decode(df)


def latest(store: Path) -> dict[str, dict]:
    out = {}
    for row in notebook_records(store).itertuples():
        out[row.params["cell_id"]] = {"status": row.status, "error": row.error, "params": row.params,
                                      "run_id": row.run_id}
    return out


def squeue(*args: str) -> list[str]:
    res = subprocess.run(["squeue", "-h", *args], capture_output=True, text=True, timeout=30)
    return [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def timeout_run(cluster, tmp_path_factory):
    """A cell that sleeps 300 s under a 1-minute Slurm limit, submitted at once and checked by the last test."""
    d = tmp_path_factory.mktemp("slurm-timeout")
    plan = write_plan(d / "plan.yaml", "slurm-timeout", where(cluster, time_limit_min=1),
                      [{"notebook": "tiny", "params": {"sleep_s": 300.0}}], timeout_s=600)
    t0 = time.monotonic()
    proc = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(d / "out"),
                  "--store", str(d / "store"), background=True)
    yield {"proc": proc, "store": d / "store", "out": d / "out", "t0": t0}
    if proc.poll() is None:
        proc.kill()


def test_plan_results_land_in_store(cluster, timeout_run, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", "slurm-basic",
                      where(cluster, cpus_per_task=1, **({} if cluster.external else {"constraint": "cpu-test"})),
                      [{"notebook": "tiny", "grid": {"value": [7, 11]}}])
    store, out = tmp_path / "store", tmp_path / "out"
    res = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    assert res.returncode == 0, res.stderr
    recs = latest(store)
    assert len(recs) == 2 and {r["status"] for r in recs.values()} == {"ok"}
    values = decode(Store(store).query("select * from results where name = 'slurm_tiny'"))
    assert sorted(m["value"] for m in values.metrics) == [7, 11]
    # both cells ran as tasks of ONE job array, with the array index -> cell mapping file
    jobs = {m["slurm_job"].split("_")[0] for m in values.metrics}
    assert len(jobs) == 1
    [group] = list((out / "slurm").glob("*/*"))
    cells = (group / "cells.txt").read_text().split()
    assert sorted(cells) == sorted(recs)
    script = (group / "job.sh").read_text()
    assert "#SBATCH --array=0-1" in script and "#SBATCH --cpus-per-task=1" in script
    assert cluster.external or "#SBATCH --constraint=cpu-test" in script
    assert "#SBATCH --time=" in script  # from the cell timeout (300 s + margin -> 6 min)
    assert all((out / "runs").glob(f"*/{c}.ipynb") for c in cells)
    # a finished plan is a no-op: nothing submitted
    again = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert len(notebook_records(store)) == 2


@pytest.mark.parametrize(("launcher", "shape"), [("srun", {"ntasks": 2}), ("torchrun", {"ntasks_per_node": 2})])
def test_multi_rank_cell_runs_every_rank(cluster, tmp_path, launcher, shape):
    plan = write_plan(tmp_path / "plan.yaml", "slurm-ranks", where(cluster, launcher=launcher, **shape),
                      [{"notebook": "ranks", "params": {"timeout_s": 90.0}}])
    store, out = tmp_path / "store", tmp_path / "out"
    res = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    assert res.returncode == 0, res.stderr + "\n".join(p.read_text() for p in out.glob("slurm/*/*/logs/*"))
    # rank 0 alone writes to the shared store: one notebook record, one collective check of sum(1, 2)
    assert len(notebook_records(store)) == 1
    checks = decode(Store(store).query("select * from results where name = 'slurm_allreduce_check'"))
    assert len(checks) == 1
    m = checks.metrics.iloc[0]
    assert m["world_size"] == 2 and m["sum"] == 3.0 and m["rank"] == 0
    assert m["master_addr"] and int(m["master_port"]) > 0  # torchrun's agent sets its own store address
    script = next((out / "slurm").glob("*/*/job.sh")).read_text()
    assert ("-m torch.distributed.run" in script) == (launcher == "torchrun")
    # rank 1 ran the same notebook, into its side store
    side = list((out / "slurm").glob("*/*/ranks/*/rank-1/store"))
    assert side and len(Store(side[0]).records(name="slurm_allreduce_check")) == 1


def test_scancel_is_recorded_failed_and_resume_completes(cluster, tmp_path):
    release = tmp_path / "release"
    plan = write_plan(tmp_path / "plan.yaml", "slurm-cancel", where(cluster),
                      [{"notebook": "tiny", "params": {"sleep_s": 600.0, "release_file": str(release), "value": 5}}])
    store, out = tmp_path / "store", tmp_path / "out"
    proc = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store),
                  background=True)
    try:
        job = None
        deadline = time.monotonic() + 180  # generous: a loaded machine starts jobs late
        while time.monotonic() < deadline:
            rows = [r.split("|") for r in squeue("-n", "hweval-slurm-cancel-" + _node_id(), "-o", "%A|%T")]
            running = [r[0] for r in rows if r[1] == "RUNNING"]
            if running:
                job = running[0]
                break
            time.sleep(0.3)
        assert job, "the job never started"
        time.sleep(1.0)
        subprocess.run(["scancel", job], check=True, timeout=60)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    [rec] = latest(store).values()
    assert rec["status"] == "failed"
    assert "CANCELLED" in rec["error"] and rec["params"]["slurm_state"] == "CANCELLED"
    assert not Store(store).records(name="slurm_tiny").shape[0]  # killed before it wrote its value
    # a plain rerun keeps the failure; --resume resubmits it
    plain = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    assert "use --resume" in plain.stderr and len(notebook_records(store)) == 1
    release.touch()
    res = hweval("run", "--plan", str(plan), "--backend", "slurm", "--resume", "--out", str(out), "--store", str(store))
    assert res.returncode == 0, res.stderr
    [rec] = latest(store).values()
    assert rec["status"] == "ok"
    assert Store(store).records(name="slurm_tiny").shape[0] == 1


def _wait_running(name: str, timeout_s: float = 180) -> str | None:  # generous: loaded machines start jobs late
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = [r.split("|") for r in squeue("-n", name, "-o", "%A|%T")]
        running = [r[0] for r in rows if r[1] == "RUNNING"]
        if running:
            return running[0]
        time.sleep(0.3)
    return None


def test_resume_after_sigkilled_submitter_waits_for_its_live_job(cluster, tmp_path):
    # the job sleeps 60 s: long enough to outlive its submitter and still run when --resume asks Slurm, on a
    # loaded machine too
    plan = write_plan(tmp_path / "plan.yaml", "slurm-orphan", where(cluster),
                      [{"notebook": "tiny", "params": {"sleep_s": 60.0, "value": 3}}])
    store, out = tmp_path / "store", tmp_path / "out"
    args = ("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    proc = hweval(*args, background=True)
    try:
        job = _wait_running("hweval-slurm-orphan-" + _node_id())
        assert job, "the job never started"
        proc.send_signal(signal.SIGKILL)  # the submitter dies; its job goes on (batch semantics)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert any(r.endswith("RUNNING") for r in squeue("-j", job, "-o", "%T"))
    assert not notebook_records(store).shape[0]
    # the job ledger names the live job: --resume waits for it instead of submitting the cell again
    waiter = hweval(*args, "--resume", background=True)
    try:
        _, err = waiter.communicate(timeout=400)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            subprocess.run(["scancel", job], timeout=30)
    assert waiter.returncode == 0, err
    assert "waiting for 1 cell(s) an earlier run submitted" in err and "submitted 1 cell(s)" not in err
    [rec] = latest(store).values()
    assert rec["status"] == "ok"
    assert len(notebook_records(store)) == 1
    values = decode(Store(store).query("select * from results where name = 'slurm_tiny'"))
    assert len(values) == 1 and values.metrics.iloc[0]["slurm_job"].split("_")[0] == job
    assert not list(store.glob(".hweval-slurm-*"))


def test_ctrl_c_cancels_jobs_and_records_them(cluster, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", "slurm-sigint", where(cluster),
                      [{"notebook": "tiny", "params": {"sleep_s": 600.0}}])
    store, out = tmp_path / "store", tmp_path / "out"
    proc = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store),
                  background=True)
    try:
        job = _wait_running("hweval-slurm-sigint-" + _node_id())
        assert job, "the job never started"
        proc.send_signal(signal.SIGINT)
        # generous: on a loaded machine scancel, the poller's last look and the record take a while; the
        # assertion is that it ends, cancelled and recorded
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    [rec] = latest(store).values()
    assert rec["status"] == "failed" and "hweval run interrupted" in rec["error"]
    # the job is gone from the queue (cancelled), not left running without a poller
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(r.endswith("RUNNING") for r in squeue("-j", job, "-o", "%T")):
        time.sleep(0.5)
    assert not [r for r in squeue("-j", job, "-o", "%T") if r in ("RUNNING", "PENDING")]


def test_job_dying_before_writing_is_recorded_by_poller(cluster, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", "slurm-dies", where(cluster),
                      [{"notebook": "tiny"}])
    store, out = tmp_path / "store", tmp_path / "out"
    # the job's interpreter exits 1 at once: no runner, no record from the job itself
    res = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store),
                 env={"HWEVAL_SLURM_PYTHON": "/bin/false"})
    assert res.returncode == 1
    [rec] = latest(store).values()
    assert rec["status"] == "failed" and "without writing a result" in rec["error"] and "FAILED" in rec["error"]


def test_unknown_partition_is_input_error(cluster, tmp_path):
    plan = write_plan(tmp_path / "plan.yaml", "slurm-badpart", {"partition": "no-such-partition"},
                      [{"notebook": "tiny"}])
    store, out = tmp_path / "store", tmp_path / "out"
    res = hweval("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out), "--store", str(store))
    assert res.returncode == 2, res.stderr
    assert "sbatch rejected" in res.stderr and "partition" in res.stderr.lower()
    assert len(res.stderr.strip().splitlines()) <= 2  # the plan line + one error line
    assert not store.exists() or not list(store.glob("part-*"))
    assert not (out / "slurm").exists()


def test_time_limit_is_recorded_timeout(cluster, timeout_run):
    proc = timeout_run["proc"]
    # the job may start late behind the other tests' jobs on this one-node cluster, and on a loaded machine
    # Slurm's limit enforcement lags (273 s seen beside a CPU burner); what tells Slurm's 1-minute limit from
    # the runner's 600 s timeout is the TIMEOUT state in the record and an end before 600 s
    _, err = proc.communicate(timeout=max(590 - (time.monotonic() - timeout_run["t0"]), 30))
    elapsed = time.monotonic() - timeout_run["t0"]
    assert proc.returncode == 1, err
    [rec] = latest(timeout_run["store"]).values()
    assert rec["status"] == "timeout", rec
    assert "TIMEOUT" in rec["error"]
    assert 55 < elapsed < 600  # killed by Slurm's 1-minute limit, not by the runner's 600 s timeout
    assert json.dumps(rec["params"]["parameters"]) == json.dumps({"sleep_s": 300.0})
