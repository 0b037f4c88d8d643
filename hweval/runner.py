"""Execute plan cells (papermill notebooks) and keep their status in the store.

One cell = one notebook execution, run by :func:`run_cell`:

* a *worker* subprocess (``python -m hweval.runner --worker SPEC``, its own
  session) converts the jupytext script to ``.ipynb`` and runs papermill with
  ``kernel_name="python3"`` and the cell's parameters injected; the kernel
  inherits ``HWEVAL_RUN_ID``, ``HWEVAL_PLAN``, ``HWEVAL_NOTEBOOK``,
  ``HWEVAL_STORE`` (and ``HWEVAL_CELL_ID``, ``HWEVAL_NODE``), so every record
  the notebook writes is tagged with its plan and run;
* the supervising :func:`run_cell` waits at most ``timeout_s``; past it, the
  worker and every descendant (the kernel) are killed and the cell is recorded
  as ``timeout``. A kernel that dies (SIGKILL, segfault, OOM killer) makes
  papermill raise ``DeadKernelError`` and the cell is recorded as ``failed``;
  a worker that dies is recorded as ``failed`` with its exit signal;
* the executed notebook ``<out_dir>/<cell_id>.ipynb`` gets ``metadata.hweval``
  = {cell_id, plan, run_id, node, notebook, parameters, status, error,
  fingerprint}; papermill's own ``metadata.papermill.parameters`` is kept;
* one ``Record(kind="notebook", name=<notebook>, params={"cell_id", "node",
  "parameters", "output"})`` with status ``ok``/``failed``/``timeout`` is
  appended to the store. It is the source of truth for completion:
  :func:`cell_states` returns the latest notebook record per ``cell_id`` of a
  plan, and :func:`select_cells` picks what a run must do (missing cells;
  ``resume`` adds failed/timed-out ones; ``force`` takes all).

``python -m hweval.runner --plan FILE --cell CELL_ID --out DIR --store DIR --run-id ID``
runs one cell (the Slurm job script calls this) and exits 0 if it finished
``ok``, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hwcore.errors import InputError
from hweval.plan import REPO, Cell, Plan
from hwcore import records
from hwcore.records import CellRecord
from hwcore.store import Record, Store, new_run_id

KILL_GRACE_S = 5.0
DONE = "ok"
WORK_PREFIX = ".hweval-cell-"  # a cell's scratch folder in its run folder
PARENT_ENV = "HWEVAL_RUNNER_PID"  # the worker dies with this process (Linux: PR_SET_PDEATHSIG)
LOCK_PREFIX = ".hweval-run-"  # <store>/.hweval-run-<plan>.lock: one `hweval run` of a plan per store

_active: set[subprocess.Popen] = set()
_active_lock = threading.Lock()


# -- children die with the runner ------------------------------------------------------
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_libc_prctl = None


def _prctl():  # -> the libc prctl function, or None where there is none
    global _libc_prctl
    if _libc_prctl is None and sys.platform.startswith("linux"):
        import ctypes

        try:
            _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _libc_prctl = False
    return _libc_prctl or None


def die_with_parent(parent_pid: int | None) -> bool:
    """Have the kernel SIGKILL this process when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    Survives ``exec``; a parent that died before the call is caught by comparing
    ``getppid()`` with ``parent_pid`` (then this process kills itself). Returns
    False where the platform has no such signal (the caller warns).
    """
    fn = _prctl()
    if fn is None or fn(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


_launches = itertools.count(1)


def _kernel_manager_class():  # -> a jupyter_client AsyncKernelManager subclass
    """Kernels that die with their worker: ``PR_SET_PDEATHSIG`` in the kernel's pre-exec.

    Their connection file goes to ``$JUPYTER_RUNTIME_DIR`` (the cell's scratch), not ``$TMPDIR``.

    Only when the kernel is launched from the worker's main thread (the parent
    death signal fires when the launching *thread* ends); otherwise ipykernel's
    own parent poller (``JPY_PARENT_PID``, 1 s) ends the kernel once the worker is gone.
    """
    from jupyter_client.manager import AsyncKernelManager

    _prctl()  # resolve before fork: the pre-exec function only calls it

    class DiesWithWorker(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            if not self.connection_file:  # else jupyter_client's mkstemp in $TMPDIR, left there by a kill
                from jupyter_core.paths import jupyter_runtime_dir

                rt = jupyter_runtime_dir()  # the cell's scratch folder (JUPYTER_RUNTIME_DIR)
                os.makedirs(rt, exist_ok=True)
                # a fresh name per manager (a retried start must not meet the dead kernel's file)
                self.connection_file = os.path.join(rt, f"kernel-{os.getpid()}-{next(_launches)}.json")

        async def _async_launch_kernel(self, kernel_cmd, **kw):  # noqa: ANN001 - jupyter_client's signature
            if _prctl() is not None and threading.current_thread() is threading.main_thread():
                parent = os.getpid()
                kw.setdefault("preexec_fn", lambda: die_with_parent(parent) or None)
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return DiesWithWorker


def sweep_scratch(out_dir: str | Path, keep: Iterable[str | Path] = ()) -> list[Path]:
    """Remove cell scratch folders (``runs/*/.hweval-cell-*``) left under ``out_dir`` by a killed runner.

    Call it only while holding the plan's :class:`PlanLock`: then no live local runner owns them. Slurm
    jobs outlive the run that submitted them: ``keep`` names the scratch folders of tasks still in the
    plan's job ledger (:func:`hweval.slurm.ledger.Ledger.scratch_dirs`), which are left alone.
    """
    kept = {os.path.abspath(k) for k in keep}
    removed = []
    for d in Path(out_dir).glob(f"runs/*/{WORK_PREFIX}*"):
        if d.is_dir() and os.path.abspath(d) not in kept:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


# -- one run of a plan per store --------------------------------------------------------
class PlanLocked(InputError):
    """Another live process runs this plan on this store."""


class PlanLock:
    """Advisory lock (``fcntl.flock``) on ``<store>/.hweval-run-<plan>.lock`` for the length of a run.

    The kernel drops it when the holder exits, SIGKILL included, so a stale lock
    never blocks; the file records the holder (pid, host, run id) for the refusal
    message. The holder deletes the file on release (and an empty store folder it
    created), so a run that ends on bad input leaves nothing behind; a waiter that
    locked a file deleted meanwhile notices (inode check) and locks the new one.
    """

    def __init__(self, store: Store, plan_name: str) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", plan_name) or "_"
        self.path = Path(store.path) / f"{LOCK_PREFIX}{safe}.lock"
        self.plan_name = plan_name
        self._fd: int | None = None
        self._made_dir = False

    def holder(self) -> str:
        try:
            text = self.path.read_text().strip()
        except OSError:
            text = ""
        return text or "pid unknown"

    def _open(self) -> int:
        try:
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._made_dir = True
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise InputError(f"store: cannot create the run lock {self.path}: {exc.strerror}") from exc

    def acquire(self, *, wait: bool = False, run_id: str = "", on_wait: Callable[[str], None] | None = None) -> None:
        import fcntl

        told = False
        while True:
            fd = self._open()
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if not wait:
                        raise PlanLocked(
                            f"plan {self.plan_name}: already running on this store ({self.holder()}; "
                            f"lock {self.path}); wait for it or pass --wait-lock"
                        ) from None
                    if on_wait is not None and not told:
                        on_wait(self.holder())
                        told = True
                    fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
            except BaseException:  # clean up, then re-raise (Ctrl-C included)
                os.close(fd)
                raise
            if same:
                break
            os.close(fd)  # the previous holder deleted the file we locked: lock the current one
        try:
            os.ftruncate(fd, 0)
            info = f"pid {os.getpid()} on {socket.gethostname()}, run {run_id or '?'}, since {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}"
            os.pwrite(fd, info.encode() + b"\n", 0)
        except BaseException:  # clean up, then re-raise (Ctrl-C included)
            os.close(fd)
            raise
        self._fd = fd

    def is_held_elsewhere(self) -> bool:
        """True when another process holds the lock now (changes nothing)."""
        import fcntl

        if not self.path.exists():
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.path)  # still holding it: waiters re-check the inode
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None
            if self._made_dir:
                with contextlib.suppress(OSError):
                    self.path.parent.rmdir()  # only if the run wrote nothing else there

    def __enter__(self) -> PlanLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


# -- completion state -----------------------------------------------------------------
def cell_states(store: Store, plan_name: str) -> dict[str, dict[str, Any]]:
    """Latest notebook record per ``cell_id`` of ``plan_name``: ``{cell_id: {status, run_id, output, error, finished_at}}``."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records.read(store, CellRecord, plan=plan_name):
        if not rec.cell_id:
            continue
        out[rec.cell_id] = {
            "status": rec.status,
            "run_id": rec.run_id,
            "error": rec.error,
            "output": rec.output,
            "finished_at": rec.finished_at,
        }
    return out


def select_cells(
    cells: Iterable[Cell], states: dict[str, dict[str, Any]], *, resume: bool = False, force: bool = False
) -> tuple[list[Cell], dict[str, list[Cell]]]:
    """Split cells into (to run, {"done": [...], "failed": [...]}) per the resume/force rules.

    * ``force``: every cell runs again.
    * default: only cells without any notebook record run; a finished plan is a no-op.
    * ``resume``: cells without a record, and cells whose latest record is not ``ok``.
    """
    todo: list[Cell] = []
    kept: dict[str, list[Cell]] = {"done": [], "failed": []}
    for c in cells:
        st = states.get(c.cell_id)
        if force or st is None:
            todo.append(c)
        elif st["status"] == DONE:
            kept["done"].append(c)
        elif resume:
            todo.append(c)
        else:
            kept["failed"].append(c)
    return todo, kept


# -- one cell ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CellOutcome:
    status: str
    error: str | None
    output: Path
    wall_s: float


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGTERM then SIGKILL the worker and all its descendants (the kernel lives in its own session)."""
    gone: tuple[type[BaseException], ...] = (OSError,)  # a descendant that exited meanwhile
    try:
        import psutil

        gone = (psutil.Error, OSError)
        try:
            kids = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            kids = []
    except ImportError:  # pragma: no cover - psutil is a dependency
        kids = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    for k in kids:
        with contextlib.suppress(*gone):
            k.terminate()
    try:
        proc.wait(KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for k in kids:
        with contextlib.suppress(*gone):
            k.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILLed; a process stuck in the kernel is reaped later
        proc.wait(KILL_GRACE_S)


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _annotate(output: Path, meta: dict[str, Any]) -> None:
    """Write ``metadata.hweval`` into the executed notebook (atomic replace)."""
    import nbformat

    if not output.exists():
        return
    try:
        nb = nbformat.read(output, as_version=4)
    except Exception:  # noqa: BLE001 - a killed worker's half-written notebook (any parse error): its record says why
        return
    nb.metadata["hweval"] = meta
    tmp = output.with_name(f".{output.name}.tmp")
    nbformat.write(nb, tmp)
    os.replace(tmp, output)


def run_cell(
    cell: Cell,
    *,
    out_dir: str | Path,
    store: Store | str | Path | None = None,
    plan_name: str,
    run_id: str,
    timeout_s: float | None = None,
    env: dict[str, str] | None = None,
    on_start: Callable[[Cell], None] | None = None,
) -> str:
    """Execute one cell and append its notebook record; returns the status (ok / failed / timeout).

    Never raises for a failing, hanging or killed notebook: the failure is the
    returned and recorded status. ``env`` adds variables for the worker and
    kernel (the local backend uses it for thread counts).
    """
    from hwcore.fingerprint import fingerprint

    st = store if isinstance(store, Store) else Store(store)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    output = out / f"{cell.cell_id}.ipynb"
    log = out / f"{cell.cell_id}.log"
    limit = float(timeout_s if timeout_s is not None else cell.timeout_s)
    started = datetime.now(UTC)
    t0 = time.monotonic()

    # the worker's scratch (spec, result, converted input, kernel connection file) lives beside the output, not
    # in /tmp: removed when the cell ends, and swept by the next run of the plan if this runner is SIGKILLed
    work = out / f"{WORK_PREFIX}{cell.cell_id}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "runtime").mkdir(parents=True)
    try:
        spec_path = work / "spec.json"
        result_path = work / "result.json"
        spec = {"cell": cell.to_json(), "output": str(output), "result": str(result_path),
                "input": str(work / "input.ipynb")}
        spec_path.write_text(json.dumps(spec, default=str))
        wenv = dict(os.environ)
        wenv.update(env or {})
        wenv.update(
            {
                PARENT_ENV: str(os.getpid()),
                "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
                "HWEVAL_RUN_ID": run_id,
                "HWEVAL_PLAN": plan_name,
                "HWEVAL_NOTEBOOK": cell.notebook,
                "HWEVAL_STORE": str(Path(st.path).resolve()),
                "HWEVAL_CELL_ID": cell.cell_id,
                "HWEVAL_NODE": cell.node,
                "PYTHONUNBUFFERED": "1",
            }
        )
        status, error = "failed", None
        with open(log, "w") as logf:
            if on_start is not None:
                on_start(cell)
            proc = subprocess.Popen(
                [sys.executable, "-m", "hweval.runner", "--worker", str(spec_path)],
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=wenv,
                cwd=str(REPO),
                start_new_session=True,
            )
            with _active_lock:
                _active.add(proc)
            try:
                try:
                    rc = proc.wait(limit)
                except subprocess.TimeoutExpired:
                    _kill_tree(proc)
                    rc = None
                    status, error = "timeout", f"notebook {cell.notebook} exceeded its timeout of {limit:g} s; killed"
                except BaseException:  # clean up, then re-raise (Ctrl-C included)
                    _kill_tree(proc)
                    raise
            finally:
                with _active_lock:
                    _active.discard(proc)
        if rc is not None:
            result = None
            if result_path.exists():
                with contextlib.suppress(json.JSONDecodeError, OSError):
                    result = json.loads(result_path.read_text())
            if result is not None:
                status, error = result["status"], result.get("error")
            elif rc < 0:
                status, error = "failed", f"worker killed by signal {signal.Signals(-rc).name}\n{_tail(log)}"
            else:
                status, error = "failed", f"worker exited with code {rc} without a result\n{_tail(log)}"
    finally:
        shutil.rmtree(work, ignore_errors=True)

    wall_s = time.monotonic() - t0
    fp = fingerprint()
    meta = {
        "cell_id": cell.cell_id,
        "plan": plan_name,
        "run_id": run_id,
        "node": cell.node,
        "notebook": cell.notebook,
        "parameters": cell.params,
        "status": status,
        "error": error,
        "wall_s": wall_s,
        "fingerprint": fp,
    }
    _annotate(output, meta)
    st.append(cell_record(cell, plan_name=plan_name, run_id=run_id, status=status, error=error, output=output,
                          started_at=started, fingerprint=fp, wall_s=wall_s, timeout_s=limit))
    return status


def cell_record(cell: Cell, *, plan_name: str, run_id: str, status: str, error: str | None, output: str | Path,
                started_at: datetime, fingerprint: dict[str, Any], **fields: Any) -> Record:
    """The notebook record of one plan cell, finished now: the runner's, and the Slurm poller's for a task
    that wrote none (``fields``: ``wall_s``, ``timeout_s``, ``slurm_job``, ``slurm_state``)."""
    return CellRecord(
        cell_id=cell.cell_id,
        notebook_name=cell.notebook,
        node=cell.node,
        parameters=cell.params,
        output=str(output),
        is_report=getattr(cell, "is_report", False),
        status=status,
        error=error,
        run_id=run_id,
        plan=plan_name,
        notebook=cell.notebook,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        fingerprint=fingerprint,
        **fields,
    ).to_record()


def kill_active() -> None:
    """Kill every running worker (Ctrl-C of the batch)."""
    with _active_lock:
        procs = list(_active)
    for p in procs:
        _kill_tree(p)


# -- the worker (runs inside the subprocess) --------------------------------------------
#: the longest a worker waits for its Jupyter kernel to answer (bounded by the cell's own timeout_s)
KERNEL_START_TIMEOUT_S = 600.0
#: how many times a worker launches a kernel that dies before answering kernel_info (no cell has run yet)
KERNEL_START_ATTEMPTS = 3
#: jupyter_client's message for a kernel that exited during start-up. With parallel workers the usual cause is
#: the port race of jupyter_client (it binds five free ports, releases them and hands them to the kernel, so
#: two kernels launched at once by different processes can pick the same port and one dies with "Address
#: already in use"; nteract/papermill#511); seen in CI with --jobs 2. No cell has run, so a retry is safe.
_KERNEL_START_DIED = "Kernel died before replying to kernel_info"


def _died_at_start(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and _KERNEL_START_DIED in str(exc)


def _worker(spec_path: str) -> int:
    parent = os.environ.get(PARENT_ENV)
    if parent and not die_with_parent(int(parent)):
        import warnings

        warnings.warn("hweval.runner: no parent-death signal on this platform; a killed runner may leave this "
                      "worker running", RuntimeWarning, stacklevel=1)
    spec = json.loads(Path(spec_path).read_text())
    cell = spec["cell"]
    output = Path(spec["output"])
    result_path = Path(spec["result"])

    def finish(status: str, error: str | None) -> int:
        result_path.write_text(json.dumps({"status": status, "error": error}))
        return 0

    import jupytext
    import nbformat
    import papermill as pm

    try:
        nb = jupytext.read(cell["notebook_path"])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        src = Path(spec["input"]) if spec.get("input") else output.with_name(f".{output.stem}.input.ipynb")
        nbformat.write(nb, src)
    except Exception as exc:  # noqa: BLE001 - jupytext/nbformat raise many types; recorded as the cell's failure
        return finish("failed", f"cannot convert {cell['notebook_path']}: {exc}")
    try:
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            try:
                pm.execute_notebook(
                    str(src),
                    str(output),
                    parameters=cell["params"],
                    kernel_name="python3",
                    cwd=str(REPO),
                    progress_bar=False,
                    log_output=True,
                    request_save_on_cell_execute=True,
                    kernel_manager_class=_kernel_manager_class(),
                    # papermill's default 60 s for the kernel to answer is too short on a loaded machine (seen in
                    # CI on 2 busy cores: "Kernel didn't respond in 60 seconds"); the cell's own limit still
                    # bounds the whole run
                    start_timeout=int(min(float(cell.get("timeout_s") or KERNEL_START_TIMEOUT_S),
                                          KERNEL_START_TIMEOUT_S)),
                )
                break
            except RuntimeError as exc:
                if not _died_at_start(exc) or attempt == KERNEL_START_ATTEMPTS:
                    raise
                print(f"hweval.runner: kernel died at start-up (attempt {attempt} of {KERNEL_START_ATTEMPTS}, "
                      f"likely jupyter_client's port race); launching a new one", file=sys.stderr, flush=True)
                time.sleep(0.5 * attempt)
        status, error = "ok", None
    except pm.PapermillExecutionError as exc:
        status, error = "failed", f"{exc.ename}: {exc.evalue}"
    except Exception as exc:  # noqa: BLE001 - DeadKernelError, CellTimeoutError, kernel start: recorded below
        name = type(exc).__name__
        status = "timeout" if name in ("CellTimeoutError", "TimeoutError") else "failed"
        msg = str(exc).strip().splitlines()
        error = f"{name}: {msg[0] if msg else ''}".strip()
        if name == "DeadKernelError":
            error = f"kernel died during execution (killed or crashed): {error}"
        elif _died_at_start(exc):
            error = f"kernel died at start-up {KERNEL_START_ATTEMPTS} times: {error}"
        traceback.print_exc()
    finally:
        with contextlib.suppress(OSError):
            src.unlink()
    return finish(status, error)


# -- the local backend -------------------------------------------------------------------
def run_local(
    plan: Plan,
    cells: list[Cell],
    *,
    out_dir: Path,
    store: Store,
    run_id: str,
    jobs: int = 1,
    progress: bool = True,
    timeout_s: float | None = None,
) -> dict[str, str]:
    """Run ``cells`` with ``jobs`` workers in parallel; returns ``{cell_id: status}``."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    env: dict[str, str] = {}
    if jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
        # share the cores between concurrent notebooks instead of oversubscribing them
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        env["OMP_NUM_THREADS"] = str(max(1, cores // jobs))
    statuses: dict[str, str] = {}
    run_dir = out_dir / "runs" / run_id

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
        disable=not progress,
        transient=False,
    )
    with bar:
        task = bar.add_task(f"plan {plan.name}", total=len(cells), last="")
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futs = {
                pool.submit(
                    run_cell, c, out_dir=run_dir, store=store, plan_name=plan.name, run_id=run_id,
                    timeout_s=timeout_s, env=env,
                ): c
                for c in cells
            }
            try:
                for fut in as_completed(futs):
                    c = futs[fut]
                    try:
                        statuses[c.cell_id] = fut.result()
                    except Exception as exc:  # noqa: BLE001 - e.g. the store became unwritable: printed, cell failed
                        statuses[c.cell_id] = "failed"
                        console.print(f"[red]{c.cell_id}: runner error: {exc}")
                    bar.update(task, advance=1, last=f"{c.notebook}@{c.node}: {statuses[c.cell_id]}")
            except KeyboardInterrupt:
                for f in futs:
                    f.cancel()
                kill_active()
                raise
    return statuses


# -- module entry --------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hweval.runner", description="Run one plan cell.")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--plan")
    ap.add_argument("--cell")
    ap.add_argument("--out")
    ap.add_argument("--store")
    ap.add_argument("--run-id")
    ap.add_argument("--timeout-s", type=float)
    args = ap.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    try:
        for opt in ("plan", "cell", "out"):
            if not getattr(args, opt):
                raise InputError(f"--{opt} is required")
        from hweval.plan import load_plan

        plan = load_plan(args.plan)
        cell = plan.cell(args.cell)
        if cell.is_report:
            cell = plan.report_cell(report_dir=Path(args.out).resolve().parent / "report") or cell
        store = Store(args.store)
        store.check_writable()
        status = run_cell(
            cell, out_dir=args.out, store=store, plan_name=plan.name, run_id=args.run_id or new_run_id(),
            timeout_s=args.timeout_s,
        )
    except InputError as exc:
        print(f"hweval.runner: error: {exc}", file=sys.stderr)
        return 2
    print(f"{cell.cell_id}: {status}")
    return 0 if status == DONE else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
