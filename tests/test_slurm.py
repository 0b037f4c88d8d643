"""hweval.slurm without a cluster: the slurm mapping, job scripts, state sources and the poller's records."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hweval import slurm
from hwcore.errors import InputError
from hweval.slurm import Group, SlurmSpec, TaskState
from hwcore.store import Record, Store, decode

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "tests" / "slurm" / "notebooks"


# -- the slurm mapping ----------------------------------------------------------------------
def test_unknown_key_names_field_and_valid_keys():
    with pytest.raises(InputError) as exc:
        SlurmSpec.from_mapping({"partiton": "gpu"}, where="nodes[1].slurm")
    msg = str(exc.value)
    assert msg.startswith("nodes[1].slurm.partiton: unknown key; valid keys: partition, constraint, gres")
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("mapping", "needle"),
    [
        ({"ntasks": 0}, "slurm.ntasks: expected a positive integer"),
        ({"ntasks": "2"}, "slurm.ntasks: expected a positive integer"),
        ({"nodes": True}, "slurm.nodes: expected a positive integer"),
        ({"time_limit_min": 1.5}, "slurm.time_limit_min: expected a positive integer"),
        ({"mem_gb": -1}, "slurm.mem_gb: expected a positive number of GiB"),
        ({"partition": ""}, "slurm.partition: expected a non-empty one-line string"),
        ({"gres": ["gpu:8"]}, "slurm.gres: expected a non-empty one-line string"),
        ({"launcher": "mpirun"}, "slurm.launcher: unknown value 'mpirun'; valid choices: srun, torchrun"),
        ({"extra_args": "--exclusive"}, "slurm.extra_args: expected a list of sbatch options"),
        ({"extra_args": ["exclusive"]}, "slurm.extra_args[0]: expected an sbatch option"),
        ({"extra_args": ["--exclusive", "--array=0-3"]}, "slurm.extra_args[1]: --array is set by hweval"),
        ({"launcher": "torchrun", "nodes": 2, "ntasks": 16}, "slurm.ntasks_per_node: launcher torchrun"),
    ],
)
def test_bad_values_are_input_errors(mapping, needle):
    with pytest.raises(InputError, match=None) as exc:
        SlurmSpec.from_mapping(mapping)
    assert needle in str(exc.value)


def test_sbatch_options_and_time_limit():
    spec = SlurmSpec.from_mapping({"partition": "gpu-h100", "constraint": "h100&ib", "gres": "gpu:8",
                                   "nodes": 2, "ntasks_per_node": 8, "cpus_per_task": 12, "mem_gb": 1.5,
                                   "account": "p1", "extra_args": ["--exclusive"]})
    opts = spec.sbatch_options(time_limit_min=7)
    assert opts == ["--partition=gpu-h100", "--constraint=h100&ib", "--gres=gpu:8", "--account=p1", "--nodes=2",
                    "--ntasks-per-node=8", "--cpus-per-task=12", "--mem=1536M", "--time=7", "--exclusive"]
    assert spec.multi_process
    assert SlurmSpec(ntasks_per_node=2).multi_process and not SlurmSpec(ntasks=1, nodes=1).multi_process
    # the cell timeout plus the start-up margin, rounded up to whole minutes; an explicit limit wins
    assert slurm.time_limit_min(SlurmSpec(), [300.0, 100.0]) == 6
    assert slurm.time_limit_min(SlurmSpec(), [1.0]) == 2
    assert slurm.time_limit_min(SlurmSpec(time_limit_min=3), [3000.0]) == 3
    assert slurm.time_limit_min(SlurmSpec(), [None]) is None


# -- job scripts -------------------------------------------------------------------------------
@dataclass
class FakeCell:
    cell_id: str
    node: str = "cpu-a"
    notebook: str = "tiny"
    params: dict = field(default_factory=dict)
    timeout_s: float = 60.0
    slurm: dict = field(default_factory=dict)


def _render(tmp_path, mapping, n=3):
    spec = SlurmSpec.from_mapping(mapping)
    g = Group(name="00-cpu-a", node="cpu-a", spec=spec, time_limit_min=2,
              cells=[FakeCell(f"c{i}") for i in range(n)], dir=tmp_path / "g")
    return g, slurm.render_job_script(g, plan_path=tmp_path / "plan.yaml", plan_name="p", notebooks_out=tmp_path / "nb",
                                      store_path=tmp_path / "store", run_id="r1", workdir=tmp_path, python="/venv/python")


def _bash_ok(text: str) -> None:
    res = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_single_process_script(tmp_path):
    g, (job, rank) = _render(tmp_path, {"partition": "cpu", "max_parallel": 2})
    assert rank is None
    _bash_ok(job)
    lines = job.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert "#SBATCH --array=0-2%2" in lines and "#SBATCH --partition=cpu" in lines and "#SBATCH --time=2" in lines
    assert f"#SBATCH --output={tmp_path / 'g' / 'logs' / '%A_%a.out'}" in lines
    assert "SLURM_ARRAY_TASK_ID + 1" in job and str(g.cells_file) in job
    assert "exec /venv/python -m hweval.runner --plan" in job and "--run-id r1" in job and '--cell "$CELL_ID"' in job
    assert "scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1" in job and "MASTER_PORT=" in job
    assert "srun" not in job


def test_srun_and_torchrun_scripts(tmp_path):
    _, (job, rank) = _render(tmp_path, {"ntasks": 4})
    _bash_ok(job)
    _bash_ok(rank)
    assert 'exec srun --kill-on-bad-exit=1 --ntasks="$SLURM_NTASKS" bash' in job
    assert "RANK=${RANK:-$SLURM_PROCID}" in rank and "LOCAL_RANK=${LOCAL_RANK:-${SLURM_LOCALID:-0}}" in rank
    assert 'STORE=' + str(tmp_path / "store") in rank and "rank-$RANK/store" in rank
    _, (job, rank) = _render(tmp_path, {"nodes": 2, "ntasks_per_node": 8, "launcher": "torchrun", "gres": "gpu:8"})
    _bash_ok(job)
    assert "-m torch.distributed.run --nnodes=\"$SLURM_NNODES\" --nproc-per-node=8" in job
    assert "--ntasks-per-node=1" in job and "--rdzv-endpoint=\"$MASTER_ADDR:$MASTER_PORT\"" in job
    assert "--no-python bash" in job and "HWEVAL_LAUNCHER=torchrun" in rank


def test_rank_script_routes_rank0_to_shared_store(tmp_path):
    g, (_, rank) = _render(tmp_path, {"ntasks": 2})
    script = tmp_path / "rank.sh"
    # stand in for the interpreter: print where each rank would write
    script.write_text(rank.replace("exec /venv/python -m hweval.runner", "echo"))
    out = {}
    for r in (0, 1):
        env = {"PATH": "/usr/bin:/bin", "SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_JOB_ID": "42"}
        out[r] = subprocess.run(["bash", str(script), "cellX"], capture_output=True, text=True, env=env).stdout
    assert f"--store {tmp_path / 'store'}" in out[0] and f"--out {tmp_path / 'nb'}" in out[0]
    assert f"--store {g.dir / 'ranks' / '42' / 'rank-1' / 'store'}" in out[1]
    assert "--cell cellX" in out[1]


# -- state sources -----------------------------------------------------------------------------
JOBCOMP = (
    "JobId=3 UserId=root(0) GroupId=root(0) Name=x JobState=CANCELLED Partition=debug TimeLimit=1 "
    "StartTime=2026-12-02T17:17:53 EndTime=2026-12-02T17:17:56 NodeList=vm NodeCnt=1 ProcCnt=1 WorkDir=/tmp "
    "ReservationName= Tres=cpu=1,mem=1G,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown "
    "SubmitTime=2026-12-02T17:17:53 EligibleTime=2026-12-02T17:17:53 ArrayJobId=1 ArrayTaskId=1 "
    "DerivedExitCode=0:0 ExitCode=0:15\n"
    "JobId=9 UserId=root(0) Name=y JobState=COMPLETED NodeList=vm ArrayJobId=8 ArrayTaskId=0 ExitCode=0:0\n"
)


def test_jobcomp_parsing(tmp_path):
    p = tmp_path / "jobcomp.txt"
    p.write_text(JOBCOMP)
    states = slurm.jobcomp_states(p, {"1"})
    assert list(states) == [("1", 1)]
    s = states[("1", 1)]
    assert (s.state, s.exit_code, s.nodelist, s.source) == ("CANCELLED", "0:15", "vm", "jobcomp")
    assert slurm.jobcomp_states(tmp_path / "missing.txt", {"1"}) == {}


# -- the poller's records ----------------------------------------------------------------------
class ScriptedPoller:
    """Stands in for StatePoller: returns one scripted dict of states per poll (the last one repeats)."""

    script: list[dict] = []

    def __init__(self, job_ids):
        self.n = 0

    def poll(self, wanted):
        states = self.script[min(self.n, len(self.script) - 1)]
        self.n += 1
        return {k: v for k, v in states.items() if k in wanted}


@dataclass
class FakePlan:
    name: str = "p"


def test_poller_records_abnormal_missing_and_lost(tmp_path, monkeypatch):
    from datetime import UTC, datetime

    from hweval.runner import cell_states

    store = Store(tmp_path / "store")
    cells = [FakeCell(f"c{i}") for i in range(6)]
    g = Group(name="g", node="cpu-a", spec=SlurmSpec(), time_limit_min=1, cells=cells, dir=tmp_path / "g",
              job_id="7")
    tasks = {("7", i): (g, c) for i, c in enumerate(cells)}
    # c0 finished and wrote its own record; c3 wrote a record then was killed at its time limit
    for cid, status in (("c0", "ok"), ("c3", "failed")):
        store.append(Record(kind="notebook", name="tiny", params={"cell_id": cid}, status=status,
                            error="runner: killed" if status == "failed" else None, run_id="r1", plan="p",
                            fingerprint={}))
    run = TaskState(state="RUNNING")
    ScriptedPoller.script = [
        {("7", i): run for i in range(5)} | {("7", 5): TaskState(state="PENDING", reason="Resources")},
        {("7", 0): TaskState(state="COMPLETED"), ("7", 1): TaskState(state="COMPLETED", exit_code="0:0"),
         ("7", 3): TaskState(state="TIMEOUT", exit_code="0:15"),  # c2 left every state source
         ("7", 4): TaskState(state="PREEMPTED"), ("7", 5): TaskState(state="OUT_OF_MEMORY", exit_code="0:125")},
    ]
    monkeypatch.setattr(slurm.poller, "StatePoller", ScriptedPoller)
    monkeypatch.setattr(slurm.poller, "LOST_AFTER_POLLS", 2)
    statuses = slurm.wait(tasks, plan=FakePlan(), st=store, run_id="r1", poll_s=0.01, grace_s=0.05,
                           notebooks_out=tmp_path / "nb", submitted_at=datetime.now(UTC), progress=False,
                           cell_states=cell_states)
    assert statuses == {"c0": "ok", "c1": "failed", "c2": "failed", "c3": "timeout", "c4": "preempted", "c5": "oom"}
    latest = cell_states(store, "p")
    assert latest["c1"]["status"] == "failed" and "COMPLETED (exit 0:0) without writing a result" in latest["c1"]["error"]
    assert "ended LOST" in latest["c2"]["error"]
    assert latest["c3"]["status"] == "timeout"
    assert "ended TIMEOUT (exit 0:15)" in latest["c3"]["error"] and "runner said: runner: killed" in latest["c3"]["error"]
    assert "ended PREEMPTED" in latest["c4"]["error"] and "ended OUT_OF_MEMORY (exit 0:125)" in latest["c5"]["error"]
    df = decode(store.records(kind="notebook"))
    assert len(df) == 7  # 2 from the "jobs", 5 from the poller; c0 got none
    poller_rows = df[df.params.map(lambda p: "slurm_job" in p)]
    assert sorted(p["cell_id"] for p in poller_rows.params) == ["c1", "c2", "c3", "c4", "c5"]
    assert all(fp["recorded_by"].startswith("hweval.slurm poller") for fp in poller_rows.fingerprint)


# -- through the CLI, without a cluster -----------------------------------------------------------
def _plan(tmp_path, slurm_mapping, **node_keys):
    import yaml

    from hwmodels.catalog import default_catalog

    node = sorted(default_catalog().ids())[0]
    p = tmp_path / "plan.yaml"
    p.write_text(yaml.safe_dump({"name": "badslurm", "notebooks_dir": str(NOTEBOOKS),
                                 "nodes": [{"id": node, "slurm": slurm_mapping, **node_keys}],
                                 "matrix": [{"notebook": "tiny"}]}))
    return p


def test_cli_bad_slurm_mapping_exits_2_and_writes_nothing(tmp_path, cli, store_path):
    plan = _plan(tmp_path, {"partition": "cpu", "gpus": 8})
    out = tmp_path / "out"
    res = cli("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out))
    assert res.returncode == 2
    err = [ln for ln in res.stderr.splitlines() if ln.startswith("hweval: error")]
    assert len(err) == 1
    assert "nodes[0].slurm.gpus: unknown key; valid keys: partition" in err[0]
    assert not out.exists() and not list(store_path.glob("*"))


def test_cli_without_sbatch_exits_2(tmp_path, cli, store_path):
    plan = _plan(tmp_path, {"partition": "cpu"})
    out = tmp_path / "out"
    res = cli("run", "--plan", str(plan), "--backend", "slurm", "--out", str(out),
              env={"PATH": str(Path(sys.executable).parent)})
    assert res.returncode == 2, res.stderr
    assert "sbatch not found on PATH" in res.stderr
    assert not out.exists() and not list(store_path.glob("*"))


def test_ranks_param_makes_one_job_per_rank_count(tmp_path):
    @dataclass
    class N:
        id: str
        slurm: dict

    @dataclass
    class P:
        nodes: tuple
        path: str = "plan.yaml"

    plan = P(nodes=(N("gpu-a", {"partition": "gpu", "ranks_param": "nprocs", "ntasks_per_node": 8}),))
    cells = [FakeCell(f"c{n}", node="gpu-a", params={"nprocs": n}) for n in (1, 8, 16)]
    cells.append(FakeCell("c8b", node="gpu-a", params={"nprocs": 8, "seed": 2}))
    groups = slurm.make_groups(plan, cells, tmp_path)
    shapes = [(g.spec.ntasks, g.spec.nodes, g.spec.ntasks_per_node, [c.cell_id for c in g.cells]) for g in groups]
    assert shapes == [(1, 1, 1, ["c1"]), (8, 1, 8, ["c8", "c8b"]), (16, 2, 8, ["c16"])]
    assert not groups[0].spec.multi_process and groups[2].spec.multi_process
    with pytest.raises(InputError, match=r"cell bad: params.nprocs .*expected a positive integer"):
        slurm.make_groups(plan, [FakeCell("bad", node="gpu-a", params={"nprocs": 0})], tmp_path)
    bad = P(nodes=(N("gpu-a", {"partition": "gpu", "ntask": 2}),), path="x.yaml")
    with pytest.raises(InputError, match=r"^x.yaml: nodes\[0\].slurm.ntask: unknown key; valid keys"):
        slurm.make_groups(bad, cells, tmp_path)


def test_group_sbatch_refuses_is_recorded_and_others_run(tmp_path, monkeypatch):
    from hweval.runner import cell_states

    @dataclass
    class N:
        id: str
        slurm: dict

    @dataclass
    class P:
        nodes: tuple
        path: Path
        name: str = "p"

    plan = P(nodes=(N("a", {}), N("b", {"partition": "limited"})), path=tmp_path / "plan.yaml")
    cells = [FakeCell("ca", node="a"), FakeCell("cb", node="b")]
    monkeypatch.setattr(slurm.backend, "require_slurm", lambda: None)
    monkeypatch.setattr(slurm.backend, "sbatch_test", lambda g, text: None)

    def submit(g):
        if g.node == "b":
            raise RuntimeError("sbatch failed for node b: QOSMaxSubmitJobPerUserLimit")
        return "41"

    monkeypatch.setattr(slurm.backend, "sbatch_submit", submit)
    seen = {}

    def fake_wait(tasks, **kw):
        seen.update(tasks)
        return {c.cell_id: "ok" for _, c in tasks.values()}

    monkeypatch.setattr(slurm.backend, "wait", fake_wait)
    store = Store(tmp_path / "store")
    statuses = slurm.run_plan(plan, cells, out_dir=tmp_path / "out", store=store, run_id="r1")
    assert statuses == {"ca": "ok", "cb": "failed"}
    assert list(seen) == [("41", 0)]
    st = cell_states(store, "p")
    assert set(st) == {"cb"} and "QOSMaxSubmitJobPerUserLimit" in st["cb"]["error"]
    assert (tmp_path / "out" / "slurm" / "r1" / "00-a" / "job_id").read_text().strip() == "41"


# -- a submitter killed while its jobs run: the job ledger (hweval.slurm.ledger) ----------------
class _Killed(BaseException):
    """Stands in for SIGKILL of the submitting process: nothing after it runs."""


class FakeSlurm:
    """A deterministic stand-in for sbatch / squeue / jobcomp / sacct.

    ``queue`` maps (job_id, index) -> state name as squeue reports it; a key
    absent from ``queue`` is unknown to every state source. ``on_poll`` runs
    once per poll of the waiting poller (tests advance the jobs there).
    """

    def __init__(self, monkeypatch):
        self.queue: dict[tuple[str, int], str] = {}
        self.submitted: list[str] = []
        self.next_id = 41
        self.on_poll = None
        self.squeue_error: str | None = None
        fake = self

        class Poller:
            def __init__(self, job_ids):
                self.job_ids = job_ids

            def poll(self, wanted):
                if fake.on_poll is not None:
                    fake.on_poll()
                return {k: TaskState(state=s) for k, s in fake.queue.items() if k in wanted}

        def squeue(job_ids, *, check=False):
            if fake.squeue_error:
                raise RuntimeError(fake.squeue_error)
            return {k: TaskState(state=s) for k, s in fake.queue.items() if k[0] in job_ids}

        def submit(g):
            job = str(self.next_id)
            self.next_id += 1
            self.submitted.append(job)
            for i in range(len(g.cells)):
                self.queue[(job, i)] = "PENDING"
            return job

        for mod in (slurm.backend, slurm.scheduler):
            monkeypatch.setattr(mod, "require_slurm", lambda: None)
        monkeypatch.setattr(slurm.backend, "sbatch_test", lambda g, text: None)
        monkeypatch.setattr(slurm.backend, "sbatch_submit", submit)
        monkeypatch.setattr(slurm.scheduler, "squeue_states", squeue)
        monkeypatch.setattr(slurm.poller, "StatePoller", Poller)
        monkeypatch.setenv("HWEVAL_SLURM_POLL_S", "0")
        monkeypatch.setenv("HWEVAL_SLURM_RECORD_GRACE_S", "0")


def _job_writes_record(store, cell, run_id, status="ok"):
    """What the job's own runner (python -m hweval.runner) appends when its cell ends."""
    from datetime import UTC, datetime

    from hweval.runner import cell_record

    store.append(cell_record(cell, plan_name="badslurm", run_id=run_id, status=status, error=None,
                             output="x.ipynb", started_at=datetime.now(UTC), fingerprint={}))


def _jobs_complete(fake, store, cell):
    """on_poll: every queued job of the ledger finishes ok, writing its record under the run that submitted it."""
    def advance():
        for entry in slurm.Ledger(store=store, plan_name="badslurm").load():
            key = (entry["job_id"], 0)
            if fake.queue.get(key) in ("PENDING", "RUNNING"):
                _job_writes_record(store, cell, entry["run_id"])
                fake.queue[key] = "COMPLETED"

    return advance


def _killed_submission(tmp_path, monkeypatch, fake, **node_keys):
    """`hweval run --backend slurm` of a one-cell plan, killed while it waits: returns (plan, store, cell, run_id)."""
    from hweval.execute import run_plan as run
    from hweval.plan import load_plan

    plan = load_plan(_plan(tmp_path, {"partition": "cpu"}, **node_keys))
    store = Store(tmp_path / "store")

    def killed(tasks, **kw):
        raise _Killed

    monkeypatch.setattr(slurm.backend, "wait", killed)
    with pytest.raises(_Killed):
        run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    [cell] = plan.cells()
    ledger = slurm.Ledger(store=store, plan_name=plan.name)
    [entry] = ledger.load()
    assert entry["job_id"] == "41" and entry["tasks"]["0"]["cell_id"] == cell.cell_id
    monkeypatch.setattr(slurm.backend, "wait", slurm.poller.wait)
    return plan, store, cell, entry["run_id"]


def _notebook_rows(store):
    from hwcore import records
    from hwcore.records import CellRecord

    return records.read(store, CellRecord)


def test_resume_waits_for_live_job_of_killed_submitter(tmp_path, monkeypatch):
    from hweval.execute import run_plan as run

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, run1 = _killed_submission(tmp_path, monkeypatch, fake)
    assert fake.submitted == ["41"]
    fake.queue[("41", 0)] = "RUNNING"  # the job outlived its submitter
    # the live job's scratch folder survives the sweep of killed runners' scratch; a dead runner's does not
    live_scratch = tmp_path / "out" / "runs" / run1 / f".hweval-cell-{cell.cell_id}"
    dead_scratch = tmp_path / "out" / "runs" / "old-run" / f".hweval-cell-{cell.cell_id}"
    for d in (live_scratch, dead_scratch):
        d.mkdir(parents=True)
    complete = _jobs_complete(fake, store, cell)
    seen = []

    def advance():
        seen.append((live_scratch.is_dir(), dead_scratch.exists()))
        complete()

    fake.on_poll = advance
    for kw in ({"resume": True}, {}):  # --resume and a plain rerun behave the same
        out = run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False, **kw)
        if kw:
            assert out.statuses == {cell.cell_id: "ok"}
        else:
            assert out.nothing_to_do
    assert fake.submitted == ["41"]  # never resubmitted
    assert seen[0] == (True, False)
    rows = _notebook_rows(store)
    assert [(r.cell_id, r.status, r.run_id) for r in rows] == [(cell.cell_id, "ok", run1)]  # recorded once
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


def test_job_that_ended_abnormally_meanwhile_is_recorded_once(tmp_path, monkeypatch):
    from hweval.execute import run_plan as run

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, run1 = _killed_submission(tmp_path, monkeypatch, fake)
    fake.queue[("41", 0)] = "TIMEOUT"
    logs: list[str] = []
    out = run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False, log=logs.append)
    assert fake.submitted == ["41"] and out.statuses == {} and out.kept["failed"] == [cell.cell_id]
    assert any("timeout" in ln and cell.cell_id in ln for ln in logs)
    [rec] = _notebook_rows(store)
    assert rec.status == "timeout" and rec.run_id == run1 and rec.slurm_job == "41_0"
    assert "ended TIMEOUT" in rec.error
    # nothing left to reconcile: a second run adds no record; --resume then resubmits the timed-out cell
    run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    assert len(_notebook_rows(store)) == 1
    fake.on_poll = _jobs_complete(fake, store, cell)
    res = run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False, resume=True)
    assert fake.submitted == ["41", "42"] and res.statuses == {cell.cell_id: "ok"}
    assert [r.status for r in _notebook_rows(store)] == ["timeout", "ok"]
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


@pytest.mark.parametrize("job_recorded", [True, False])
def test_job_forgotten_by_slurm(tmp_path, monkeypatch, job_recorded):
    from hweval.execute import run_plan as run

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, run1 = _killed_submission(tmp_path, monkeypatch, fake)
    del fake.queue[("41", 0)]  # past MinJobAge, no jobcomp, no accounting
    if job_recorded:
        _job_writes_record(store, cell, run1)
    out = run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    rows = _notebook_rows(store)
    assert len(rows) == 1 and fake.submitted == ["41"]
    if job_recorded:
        assert rows[0].status == "ok" and rows[0].slurm_job is None and out.nothing_to_do
    else:
        assert rows[0].status == "failed" and "no longer known to Slurm" in rows[0].error
        assert rows[0].run_id == run1 and rows[0].slurm_job == "41_0"
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


def test_poller_record_written_before_a_kill_is_not_written_again(tmp_path, monkeypatch):
    from hweval.execute import run_plan as run

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, run1 = _killed_submission(tmp_path, monkeypatch, fake)
    fake.queue[("41", 0)] = "CANCELLED"
    store.append(slurm.record_for(cell, plan_name=plan.name, run_id=run1, status="failed", error="x", job="41_0",
                                  state=TaskState(state="CANCELLED"), notebooks_out=tmp_path, submitted_at=None))
    run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    assert len(_notebook_rows(store)) == 1
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


def test_local_backend_refuses_a_cell_running_as_slurm_job(tmp_path, monkeypatch):
    from hweval.execute import run_plan as run
    from hweval.slurm.ledger import SlurmJobLive

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, run1 = _killed_submission(tmp_path, monkeypatch, fake, local=True)
    fake.queue[("41", 0)] = "RUNNING"
    with pytest.raises(SlurmJobLive) as exc:
        run(plan, store=store, out=tmp_path / "out", backend="local", progress=False, resume=True)
    msg = str(exc.value)
    assert "\n" not in msg and cell.cell_id in msg and "Slurm job 41_0" in msg and "still running" in msg
    fake.squeue_error = "squeue failed: slurm_load_jobs error: Unable to contact slurm controller"
    with pytest.raises(SlurmJobLive, match=r"may still be running \(Slurm cannot be asked here: squeue failed"):
        run(plan, store=store, out=tmp_path / "out", backend="local", progress=False, resume=True)
    assert _notebook_rows(store) == [] and slurm.Ledger(store=store, plan_name=plan.name).load()


def test_squeue_check_tells_forgotten_jobs_from_a_failing_squeue(monkeypatch):
    def answer(stderr):
        return lambda args, timeout=60: subprocess.CompletedProcess(args, 1, stdout="", stderr=stderr)

    monkeypatch.setattr(slurm.scheduler, "_cmd", answer("slurm_load_jobs error: Invalid job id specified"))
    assert slurm.squeue_states(["7"], check=True) == {}  # purged from slurmctld: absent, not an error
    monkeypatch.setattr(slurm.scheduler, "_cmd", answer("slurm_load_jobs error: Unable to contact slurm controller"))
    assert slurm.squeue_states(["7"]) == {}
    with pytest.raises(RuntimeError, match="squeue failed: slurm_load_jobs error: Unable to contact"):
        slurm.squeue_states(["7"], check=True)


def test_ledger_add_resolve_atomic(tmp_path):
    from datetime import UTC, datetime

    store = Store(tmp_path / "store")
    led = slurm.Ledger(store=store, plan_name="p/q")
    assert led.path.name == ".hweval-slurm-p_q.json" and led.load() == []
    for job, cells in (("41", ["a", "b"]), ("42", ["c"])):
        g = Group(name=f"g{job}", node="cpu-a", spec=SlurmSpec(), time_limit_min=1,
                  cells=[FakeCell(c) for c in cells], dir=tmp_path / job, job_id=job)
        led.add(g, run_id="r1", notebooks_out=tmp_path / "nb", submitted_at=datetime.now(UTC))
    assert [(j["job_id"], sorted(j["tasks"])) for j in led.load()] == [("41", ["0", "1"]), ("42", ["0"])]
    assert sorted(p.name for p in led.scratch_dirs()) == [".hweval-cell-a", ".hweval-cell-b", ".hweval-cell-c"]
    led.resolve([("41", 0), ("42", 0)])
    assert [(j["job_id"], list(j["tasks"])) for j in led.load()] == [("41", ["1"])]
    led.resolve([("41", 1)])
    assert not led.path.exists() and not list(store.path.glob(".*.tmp"))
    led.path.write_text("{not json")
    with pytest.raises(InputError, match=r"cannot read the Slurm job ledger .*may still run: check squeue"):
        led.load()


def test_ctrl_c_cancels_records_and_empties_the_ledger(tmp_path, monkeypatch):
    from hweval.execute import run_plan as run
    from hweval.plan import load_plan

    fake = FakeSlurm(monkeypatch)
    cancelled = []
    monkeypatch.setattr(slurm.poller, "scancel", cancelled.extend)

    def interrupt():
        raise KeyboardInterrupt

    fake.on_poll = interrupt
    plan = load_plan(_plan(tmp_path, {"partition": "cpu"}))
    store = Store(tmp_path / "store")
    with pytest.raises(KeyboardInterrupt):
        run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    assert cancelled == ["41"]
    [rec] = _notebook_rows(store)
    assert rec.status == "failed" and "hweval run interrupted" in rec.error
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


@pytest.mark.parametrize("where", ["ledger", "poller start"])
def test_ctrl_c_between_submission_and_polling_still_cancels_and_records(tmp_path, monkeypatch, where):
    """A Ctrl-C that lands after sbatch queued the array but before the poll loop runs (the ledger being written,
    the poller starting: seconds on a loaded machine) cancels the job and records the cell, as one during polling
    does: no job runs on without a poller and no cell is left without a record."""
    from hweval.execute import run_plan as run
    from hweval.plan import load_plan

    FakeSlurm(monkeypatch)
    cancelled = []
    monkeypatch.setattr(slurm.poller, "scancel", cancelled.extend)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    if where == "ledger":
        monkeypatch.setattr(slurm.ledger.Ledger, "add", interrupt)
    else:
        monkeypatch.setattr(slurm.poller, "StatePoller", interrupt)
    plan = load_plan(_plan(tmp_path, {"partition": "cpu"}))
    store = Store(tmp_path / "store")
    with pytest.raises(KeyboardInterrupt):
        run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False)
    assert cancelled == ["41"]
    [rec] = _notebook_rows(store)
    assert rec.status == "failed" and "hweval run interrupted" in rec.error
    assert not slurm.Ledger(store=store, plan_name=plan.name).path.exists()


def test_dry_run_lists_a_ledger_task_as_its_slurm_job(tmp_path, monkeypatch):
    """--dry-run reads the ledger (it does not ask Slurm or write anything): a cell submitted by a killed run
    shows as that job, not as a cell to run."""
    from hweval.execute import run_plan as run

    fake = FakeSlurm(monkeypatch)
    plan, store, cell, _ = _killed_submission(tmp_path, monkeypatch, fake)
    before = sorted(p.name for p in Path(store.path).iterdir())
    out = run(plan, store=store, out=tmp_path / "out", backend="slurm", progress=False, dry_run=True)
    assert [(what, c.cell_id) for what, c in out.listing] == [("slurm job 41_0", cell.cell_id)]
    assert fake.submitted == ["41"]  # nothing submitted
    assert sorted(p.name for p in Path(store.path).iterdir()) == before  # nothing written
