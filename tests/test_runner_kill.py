"""A killed runner leaves nothing running, and a plan runs once per store at a time.

* SIGKILL ``hweval run`` mid-cell: its worker and kernel are gone within
  seconds (parent-death signal), then ``--resume`` records each cell exactly
  once as ok, and no scratch folder is left in TMPDIR or the run folders; the
  row the killed attempt wrote stays in the store but the analysis and
  ``hweval results`` count the resumed attempt's only.
* A second ``hweval run`` (or ``--resume``) of a running plan on the same store
  is one line naming the holder's pid, exit 2, nothing run; ``--wait-lock``
  waits and then finds nothing to do.

Nothing here depends on machine speed: every wait is for an event (a pid file,
a process exit) with a generous limit, and the cells that must succeed have a
300 s timeout; the "sleepy" cell hangs until the test creates its marker.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from hweval.runner import cell_states, LOCK_PREFIX, WORK_PREFIX
from hwcore.store import Store

REPO = Path(__file__).resolve().parent.parent
NODE = "cpu-epyc-zen4-2c"

NOTEBOOKS = {
    "quick": '''
        # %% tags=["parameters"]
        n: int = 1  # a number

        # %%
        from hwcore.store import Record, Store
        Store().append(Record(kind="other", name="quick-nb", metrics={"n": n}))
    ''',
    # writes its kernel pid, then hangs until the marker exists
    "sleepy": '''
        # %% tags=["parameters"]
        marker: str = ""  # hang until this file exists
        pid_file: str = ""  # the kernel writes its pid here

        # %%
        import os, time
        from hwcore.store import Record, Store
        # a measurement written before the hang: the killed attempt's row stays in the (append-only) store
        Store().append(Record(kind="kernel", name="sleepy-k", params={"device": "cpu"}, metrics={"median_s": 1.0}))
        with open(pid_file + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(pid_file + ".tmp", pid_file)
        while not os.path.exists(marker):
            time.sleep(0.2)
    ''',
}


@pytest.fixture
def plan(tmp_path: Path):
    nb = tmp_path / "nb"
    nb.mkdir()
    for name, src in NOTEBOOKS.items():
        (nb / f"{name}.py").write_text(textwrap.dedent(src).lstrip())
    marker = tmp_path / "marker"
    pid_file = tmp_path / "kernel.pid"
    path = tmp_path / "killme.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: killme
        notebooks_dir: nb
        nodes: [{NODE}]
        defaults: {{timeout_s: 300}}
        matrix:
          - notebook: quick
            params: {{n: 1}}
          - notebook: sleepy
            params: {{marker: "{marker}", pid_file: "{pid_file}"}}
        """))
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    return {"plan": path, "marker": marker, "pid_file": pid_file, "out": tmp_path / "out", "tmpdir": tmpdir}


def _start(plan, store, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, HWEVAL_STORE=str(store), TMPDIR=str(plan["tmpdir"]))
    return subprocess.Popen(
        [sys.executable, "-m", "hweval", "run", "--plan", str(plan["plan"]), "--out", str(plan["out"]),
         "--store", str(store), "--no-progress", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
        start_new_session=True,  # so the test can clean up whatever a failed assertion leaves
    )


def _wait_for(pred, what: str, limit_s: float = 240.0) -> None:
    deadline = time.monotonic() + limit_s
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit_s:g} s waiting for {what}")
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cleanup(*procs: subprocess.Popen, pids: tuple[int, ...] = ()) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _notebook_records(store: Path) -> list[dict]:
    df = Store(store).records(kind="notebook", plan="killme")
    return [dict(json.loads(r["params"]), status=r["status"]) for r in df.to_dict("records")]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux only")
def test_sigkill_runner_kills_worker_and_kernel_then_resume_once(plan, store_path):
    runner = _start(plan, store_path)
    kernel = worker = None
    try:
        _wait_for(lambda: plan["pid_file"].exists() or runner.poll() is not None, "the sleepy cell's kernel")
        assert runner.poll() is None, runner.communicate()
        kernel = int(plan["pid_file"].read_text())
        worker = psutil.Process(kernel).ppid()
        assert psutil.Process(worker).ppid() == runner.pid  # runner -> worker -> kernel
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(30)
        _wait_for(lambda: not _alive(worker) and not _alive(kernel), "worker and kernel to die", 30)
    finally:
        _cleanup(runner, pids=tuple(p for p in (kernel, worker) if p))

    # the killed cell left no record; the quick cell has its one ok record
    recs = _notebook_records(store_path)
    assert [r["status"] for r in recs] == ["ok"]
    # the lock died with the runner: --resume runs at once, and only the killed cell
    plan["marker"].write_text("")
    r = _start(plan, store_path, "--resume")
    out, err = r.communicate(timeout=600)
    assert r.returncode == 0, err
    recs = _notebook_records(store_path)
    by_cell: dict[str, list[str]] = {}
    for rec in recs:
        by_cell.setdefault(rec["cell_id"], []).append(rec["status"])
    assert len(by_cell) == 2 and all(v == ["ok"] for v in by_cell.values()), by_cell
    assert {s["status"] for s in cell_states(Store(store_path), "killme").values()} == {"ok"}
    assert len(Store(store_path).records(name="quick-nb")) == 1
    # the killed attempt's measurement stays in the store, but the analysis and the default listing count the
    # resumed attempt's only (and say one row was set aside)
    from hweval import analysis

    assert len(Store(store_path).records(name="sleepy-k")) == 2
    m = analysis.load_measurements(Store(store_path), "killme")
    assert len(m.kernels) == 1 and m.set_aside == 1
    res = subprocess.run([sys.executable, "-m", "hweval", "results", "--store", str(store_path), "--name", "sleepy-k",
                          "--json"], capture_output=True, text=True, cwd=str(REPO), timeout=300)
    assert res.returncode == 0 and len(json.loads(res.stdout)) == 1, res.stderr
    assert "1 row(s) of plan-cell attempts that do not count" in res.stderr
    # no scratch left behind: nothing in TMPDIR, no cell scratch folder in any run folder
    assert not list(plan["tmpdir"].iterdir())
    assert not list(plan["out"].glob(f"runs/*/{WORK_PREFIX}*"))
    assert not [p.name for p in store_path.iterdir() if p.name.startswith(LOCK_PREFIX)]


@pytest.mark.slow
def test_second_run_of_a_running_plan_refuses_or_waits(plan, store_path):
    first = _start(plan, store_path)
    waiter = None
    try:
        _wait_for(lambda: plan["pid_file"].exists() or first.poll() is not None, "the sleepy cell's kernel")
        assert first.poll() is None, first.communicate()
        n_before = len(_notebook_records(store_path))
        for extra in ((), ("--resume",), ("--force",)):
            r = _start(plan, store_path, *extra)
            out, err = r.communicate(timeout=300)
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert r.returncode == 2, (extra, out, err)
            assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "--wait-lock" in lines[0], err
        assert len(_notebook_records(store_path)) == n_before  # nothing ran
        # --dry-run still lists, and says the plan is running
        r = _start(plan, store_path, "--dry-run")
        out, err = r.communicate(timeout=300)
        assert r.returncode == 0 and "is running now" in err and f"pid {first.pid}" in err, err
        # --wait-lock waits for the first run, then has nothing left to do
        waiter = _start(plan, store_path, "--wait-lock")
        _wait_for(lambda: "waiting for the run holding the lock" in _peek_stderr(waiter) or waiter.poll() is not None,
                  "the waiter to report waiting", 120)
        assert waiter.poll() is None
        plan["marker"].write_text("")
        _, err1 = first.communicate(timeout=600)
        assert first.returncode == 0, err1
        _, err2 = waiter.communicate(timeout=600)
        err2 = _stderr_seen.get(waiter.pid, "") + err2
        assert waiter.returncode == 0 and "nothing to do" in err2, err2
    finally:
        _cleanup(first, *([waiter] if waiter else []))
    by_cell: dict[str, int] = {}
    for rec in _notebook_records(store_path):
        by_cell[rec["cell_id"]] = by_cell.get(rec["cell_id"], 0) + 1
    assert sorted(by_cell.values()) == [1, 1]
    # the last holder deleted the lock file on release
    assert not [p.name for p in store_path.iterdir() if p.name.startswith(LOCK_PREFIX)]


_stderr_seen: dict[int, str] = {}


def _peek_stderr(p: subprocess.Popen) -> str:
    """What ``p`` wrote to stderr so far (non-blocking read of the pipe)."""
    import fcntl

    fd = p.stderr.fileno()
    fl = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        chunk = b""
    finally:
        fcntl.fcntl(fd, fcntl.F_SETFL, fl)
    _stderr_seen[p.pid] = _stderr_seen.get(p.pid, "") + chunk.decode(errors="replace")
    return _stderr_seen[p.pid]


def test_plan_lock_unit(tmp_path):
    """The lock file goes with its holder; a fresh store folder made only for the lock is removed too."""
    from hweval.runner import PlanLock, PlanLocked

    store = Store(tmp_path / "new" / "store")
    a = PlanLock(store, "p/q")
    a.acquire(run_id="r1")
    assert a.path.name == f"{LOCK_PREFIX}p_q.lock" and "run r1" in a.path.read_text()
    b = PlanLock(store, "p/q")
    with pytest.raises(PlanLocked, match=f"pid {os.getpid()}"):
        b.acquire()
    assert a.is_held_elsewhere()  # from b's point of view (flock is per open file)
    other = PlanLock(store, "other")
    other.acquire()  # another plan on the same store is independent
    other.release()
    a.release()
    assert not (tmp_path / "new" / "store").exists()
    b.acquire()
    assert b.path.exists()
    b.release()
    assert not b.path.exists()
