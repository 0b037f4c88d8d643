"""Running a plan as a library call: :func:`run_plan` (what ``hweval run`` does) -> :class:`RunOutcome`.

Completion state is the store's notebook records (latest per plan + cell_id,
see :mod:`hweval.runner`): by default only cells with no record run, so
rerunning a finished plan is a no-op; ``resume`` also re-runs failed and
timed-out cells; ``force`` re-runs everything. One run of a plan per store at a
time (:class:`hweval.runner.PlanLock`; ``wait_lock`` waits for the holder
instead of refusing). Executed notebooks go to ``OUT/runs/<run_id>/<cell_id>.ipynb``
(default OUT: ``out/<plan name>``), the report to ``OUT/report/report.html``.
Cells run locally (``backend="local"``, ``jobs`` in parallel) or as Slurm job
arrays (``backend="slurm"``, :mod:`hweval.slurm`). Slurm jobs outlive a killed
submitter: before selecting cells, a run reconciles the plan's job ledger
(:mod:`hweval.slurm.ledger`): a cell still running as a job of an earlier run
is waited for, never resubmitted (the local backend refuses it with one line),
and a job that ended meanwhile gets its outcome recorded once.

Bad input (plan, store, ``out``, backend, ``jobs``, ``timeout_s``) raises
:class:`~hwcore.errors.InputError` before anything runs or is written; a cell
that fails is a status in the outcome (and a record in the store), not an
exception.
"""

from __future__ import annotations

import importlib.util
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwcore.errors import InputError, choices_error
from hwcore.store import Store, new_run_id
from hweval.plan import Cell, Plan, load_plan

BACKENDS = ("local", "slurm")


def report_html(report_dir: Path) -> Path:
    """Where the report notebook writes the plan's HTML report."""
    return report_dir / "report.html"


#: What a report is built from besides the plan's cells (which a run tracks itself): the catalog (prices, specs),
#: the calibration and validation data the predictor reads, and the code of the packages that price and write it.
_REPO = Path(__file__).resolve().parents[1]
REPORT_INPUT_DIRS = (("data/calibration", "*.csv"), ("data/reference", "*.json"), ("hweval", "*.py"),
                     ("hwmodels", "*.py"), ("hwcore", "*.py"))
#: beside the report: the digest of the inputs it was built from (:func:`report_inputs_digest`)
REPORT_DIGEST = ".inputs.sha256"


def report_inputs_digest(cell: Cell) -> str:
    """SHA-256 over the report cell's parameters and notebook, the catalog it prices with (``HWMODELS_CATALOG`` or
    the repository's), and REPORT_INPUT_DIRS: when it differs from the one stored beside the report, the report is
    rebuilt even though no cell ran (a price, a catalog entry, the validation file or the predictor changed)."""
    import hashlib
    import json

    from hwmodels.catalog import default_dir

    h = hashlib.sha256(json.dumps(cell.params, sort_keys=True, default=str).encode())
    files = [Path(cell.notebook_path), *sorted(default_dir().glob("*.toml"))]
    for sub, pattern in REPORT_INPUT_DIRS:
        files += sorted((_REPO / sub).rglob(pattern))
    for f in files:
        if f.is_file():
            h.update(str(f.relative_to(_REPO) if f.is_relative_to(_REPO) else f).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _report_current(report_dir: Path, digest: str) -> bool:
    """Whether the report beside ``report_dir`` was built from inputs with this digest."""
    f = report_dir / REPORT_DIGEST
    return report_html(report_dir).exists() and f.is_file() and f.read_text().strip() == digest


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What one :func:`run_plan` call did.

    ``statuses`` maps the cells run now to their status; ``kept`` the cells not
    re-run (``done`` / ``failed``) to their ids; ``listing`` (dry run only) is
    ``(what, cell)`` for every cell, ``what`` in ``run`` / ``done`` /
    ``failed (kept)``. ``report_html`` is where the report goes (None: the plan
    has no report cell); ``report_status`` the report notebook's status when it
    ran now.
    """

    plan: str
    run_id: str
    out: Path
    dry_run: bool = False
    nothing_to_do: bool = False
    statuses: dict[str, str] = field(default_factory=dict)
    kept: dict[str, list[str]] = field(default_factory=dict)
    skipped_remote: list[str] = field(default_factory=list)
    listing: list[tuple[str, Cell]] = field(default_factory=list)
    report_cell_id: str | None = None
    report_html: Path | None = None
    report_status: str | None = None

    @property
    def failed(self) -> dict[str, str]:
        return {k: v for k, v in self.statuses.items() if v != "ok"}

    @property
    def ok(self) -> bool:
        """No cell run now failed and the report notebook (when it ran) succeeded."""
        return not self.failed and self.report_status in (None, "ok")


def _quiet(msg: str) -> None:
    del msg


def run_plan(
    plan: str | os.PathLike[str] | Plan,
    *,
    out: str | os.PathLike[str] | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    backend: str = "local",
    jobs: int = 1,
    resume: bool = False,
    force: bool = False,
    timeout_s: float | None = None,
    dry_run: bool = False,
    progress: bool = True,
    wait_lock: bool = False,
    log: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Run a plan's cells that need running, then its report notebook; see the module docstring.

    ``log`` receives one-line progress and diagnostics (the CLI prints them to
    stderr). Raises :class:`~hweval.runner.PlanLocked` when another live run of
    the plan holds the store and ``wait_lock`` is false.
    """
    from hweval.runner import PlanLock

    log = log or _quiet
    plan = plan if isinstance(plan, Plan) else load_plan(plan)
    st = store if isinstance(store, Store) else Store(store)
    st.check_writable()
    out_dir = Path(out) if out is not None else Path("out") / plan.name
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out: {out_dir} exists and is not a directory")
    if backend not in BACKENDS:
        raise choices_error("--backend", backend, BACKENDS)
    if backend == "slurm" and importlib.util.find_spec("hweval.slurm") is None:
        raise InputError("--backend: 'slurm' needs the module hweval.slurm, which is not installed in this checkout")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs: expected an integer >= 1, got {jobs!r}")
    if timeout_s is not None and not timeout_s > 0:
        raise InputError(f"--timeout-s: expected a number of seconds > 0, got {timeout_s!r}")
    lock = PlanLock(st, plan.name)
    run_id = new_run_id()
    args = dict(plan=plan, store=st, out=out_dir, jobs=jobs, resume=resume, force=force, backend=backend,
                timeout_s=timeout_s, progress=progress, run_id=run_id, log=log)
    if dry_run:
        if lock.is_held_elsewhere():
            log(f"note: plan {plan.name} is running now ({lock.holder()}); its cells may change")
        return _run(**args, dry_run=True)
    # one run of a plan per store: a second run (or --resume) never runs a cell a live run is running
    lock.acquire(wait=wait_lock, run_id=run_id,
                 on_wait=lambda who: log(f"plan {plan.name}: waiting for the run holding the lock ({who})"))
    with lock:
        return _run(**args, dry_run=False)


def _slurm_leftovers(plan: Plan, store: Store, cells: list[Cell], *, backend: str, resume: bool, force: bool,
                     log: Callable[[str], None]) -> dict[tuple[str, int], Any]:
    """Tasks of the plan's Slurm job ledger still to wait for (:func:`hweval.slurm.ledger.reconcile`).

    Nothing to do (and nothing imported) when the store holds no ledger for the plan. The local backend
    cannot wait for a Slurm job: a cell it would start that is still running there is refused (one line).
    """
    from hweval.runner import cell_states, select_cells

    ledger = _ledger(plan, store)
    if ledger is None or not ledger.path.exists():
        return {}
    from hweval.slurm.ledger import reconcile

    wanted = None
    if backend != "slurm":
        todo, _ = select_cells(cells, cell_states(store, plan.name), resume=resume, force=force)
        wanted = {c.cell_id for c in todo}
    found = reconcile(plan, store, can_wait=backend == "slurm", wanted=wanted)
    for cid, status in found.recorded.items():
        log(f"  {status}: {cid}: its Slurm job of an earlier run ended; outcome recorded now")
    return found.adopted


def _ledger(plan: Plan, store: Store) -> Any:
    """The plan's Slurm job ledger on ``store`` (:class:`hweval.slurm.ledger.Ledger`), None without the Slurm
    package."""
    if importlib.util.find_spec("hweval.slurm") is None:
        return None
    from hweval.slurm.ledger import Ledger

    return Ledger(store=store, plan_name=plan.name)


def _ledger_cells(plan: Plan, store: Store) -> dict[str, str]:
    """cell id -> job id of the plan's Slurm job ledger (tasks submitted by an earlier run, not yet recorded)."""
    ledger = _ledger(plan, store)
    return {str(c.get("cell_id")): f"{j['job_id']}_{i}" for j in (ledger.load() if ledger else [])
            for i, c in j["tasks"].items()}


def _ledger_scratch(plan: Plan, store: Store) -> list[Path]:
    ledger = _ledger(plan, store)
    return ledger.scratch_dirs() if ledger else []


def _run(*, plan: Plan, store: Store, out: Path, jobs: int, resume: bool, force: bool, backend: str,
         timeout_s: float | None, dry_run: bool, progress: bool, run_id: str,
         log: Callable[[str], None]) -> RunOutcome:
    from hweval.runner import cell_states, run_cell, run_local, select_cells, sweep_scratch

    cells = plan.cells()
    skipped_remote = []
    if backend == "local":
        skipped_remote = [c for c in cells if not c.local]
        cells = [c for c in cells if c.local]
    adopted: dict[tuple[str, int], Any] = {}
    if not dry_run:
        # jobs an earlier, killed `hweval run --backend slurm` left behind: record the ended, adopt the live
        adopted = _slurm_leftovers(plan, store, cells, backend=backend, resume=resume, force=force, log=log)
    states = cell_states(store, plan.name)
    todo, kept = select_cells(cells, states, resume=resume, force=force)
    running = {c.cell_id for _, c in adopted.values()}
    if running:
        log(f"{len(running)} cell(s) still running as Slurm jobs of an earlier run: waiting for them, not resubmitting")
        todo = [c for c in todo if c.cell_id not in running]
    report_dir = (out / "report").resolve()
    report_cell = plan.report_cell(report_dir=report_dir)
    report_state = states.get(report_cell.cell_id) if report_cell else None
    html = report_html(report_dir) if report_cell is not None else None
    outcome: dict[str, Any] = dict(
        plan=plan.name, run_id=run_id, out=out, kept={k: [c.cell_id for c in v] for k, v in kept.items()},
        skipped_remote=[c.cell_id for c in skipped_remote],
        report_cell_id=report_cell.cell_id if report_cell else None, report_html=html,
    )

    for c in skipped_remote:
        log(f"skip {c.cell_id}: node {c.node} is not local (local: false); use --backend slurm")
    if kept["failed"]:
        log(f"{len(kept['failed'])} cell(s) failed earlier and are not re-run; use --resume to re-run them")

    if dry_run:
        # read-only: the ledger's tasks are listed as submitted jobs (a real run asks Slurm whether they still run)
        in_ledger = _ledger_cells(plan, store)
        listing = [(f"slurm job {in_ledger[c.cell_id]}" if c in todo and c.cell_id in in_ledger
                    else "run" if c in todo else ("done" if c in kept["done"] else "failed (kept)"), c) for c in cells]
        return RunOutcome(**outcome, dry_run=True, listing=listing)

    if out.is_dir():
        # scratch of a runner killed earlier (we hold the lock: no live local runner owns it; Slurm jobs of
        # an earlier run still in the plan's job ledger may, so theirs is kept)
        sweep_scratch(out, keep=_ledger_scratch(plan, store))
    digest = report_inputs_digest(report_cell) if report_cell is not None else None
    current = report_cell is not None and _report_current(report_dir, digest)
    need_report = report_cell is not None and (
        bool(todo) or bool(adopted) or force or report_state is None or report_state["status"] != "ok"
        or not current
    )
    if not todo and not adopted and not need_report:
        log(f"plan {plan.name}: nothing to do ({len(kept['done'])} cell(s) already done; --force re-runs them)")
        return RunOutcome(**outcome, nothing_to_do=True)
    if not todo and not adopted and report_cell is not None and report_html(report_dir).exists() and not current:
        log(f"plan {plan.name}: the report's inputs changed since it was built (catalog, calibration, validation "
            "or code): rebuilding it")

    log(f"plan {plan.name}: run {run_id}: {len(todo)} cell(s) to run, {len(kept['done'])} already done; "
        f"notebooks -> {out / 'runs' / run_id}")
    statuses: dict[str, str] = {}
    if todo or adopted:
        if backend == "slurm":
            from hweval import slurm

            res = slurm.run_plan(plan, todo, out_dir=out, store=store, run_id=run_id, resume=resume, force=force,
                                 progress=progress, adopted=adopted)
            if isinstance(res, dict):
                statuses.update({k: str(v) for k, v in res.items()})
            else:  # the backend only wrote records: read them back
                fresh = cell_states(store, plan.name)
                statuses.update({c.cell_id: fresh.get(c.cell_id, {}).get("status", "failed") for c in todo})
        else:
            statuses.update(
                run_local(plan, todo, out_dir=out, store=store, run_id=run_id, jobs=jobs, progress=progress,
                          timeout_s=timeout_s)
            )
    counts = Counter(statuses.values())
    failed = {k: v for k, v in statuses.items() if v != "ok"}
    if statuses:
        log("cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if failed:
        fresh = cell_states(store, plan.name)
        for cid, status in failed.items():
            err = (fresh.get(cid, {}).get("error") or "").splitlines()
            log(f"  {status}: {cid}: {err[0] if err else ''}")

    report_status = None
    if report_cell is not None and need_report:
        report_status = run_cell(report_cell, out_dir=out / "runs" / run_id, store=store, plan_name=plan.name,
                                 run_id=run_id, timeout_s=timeout_s)
        if report_status != "ok":
            err = (cell_states(store, plan.name).get(report_cell.cell_id, {}).get("error") or "").splitlines()
            log(f"report notebook {report_status}: {err[0] if err else ''}")
        elif report_html(report_dir).exists():
            (report_dir / REPORT_DIGEST).write_text(digest + "\n")
    if report_cell is not None and not report_html(report_dir).exists():
        log(f"no report was written (see {out / 'runs' / run_id / (report_cell.cell_id + '.ipynb')})")
    return RunOutcome(**outcome, statuses=statuses, report_status=report_status)
