"""The Slurm backend of ``hweval run --backend slurm``: plan cells as Slurm job arrays.

Each plan cell becomes one Slurm array task; cells that share a node type (and
so the node entry's ``slurm:`` mapping and time limit) go into one job array,
submitted with ``sbatch`` on the partition / constraint / GRES the plan names.
Every task runs ``python -m hweval.runner --plan FILE --cell CELL_ID ...``,
which executes the notebook and appends its records to the shared store
(append-only Parquet parts, so concurrent jobs never collide). The array index
-> cell id mapping is the file ``cells.txt`` written beside the job script in
``OUT/slurm/<run_id>/<group>/``; task logs go to ``logs/%A_%a.out`` there.

The submitting process waits with a rich progress bar and polls job states:
``squeue -t all`` while slurmctld remembers the job (``MinJobAge``), then the
``jobcomp/filetxt`` completion log when the cluster writes one, then ``sacct``
where accounting runs. When a task reaches a final state the poller checks the
store; it appends a notebook record itself when

* Slurm ended the task abnormally (``TIMEOUT`` -> ``timeout``, ``PREEMPTED`` ->
  ``preempted``, ``OUT_OF_MEMORY`` -> ``oom``, ``CANCELLED`` / ``NODE_FAIL`` /
  ``BOOT_FAIL`` / ... -> ``failed``), the Slurm state and exit code in
  ``error``; this record is the cell's latest, whatever the killed runner wrote;
* or the task ended (``COMPLETED`` / ``FAILED``) without a record of this run
  (the job died before writing anything): ``failed``.

So ``--resume`` (the runner's ``select_cells``) resubmits exactly the failed,
timed-out, preempted and missing cells.

The mapping a node entry may carry (validated here; unknown keys are an
:class:`~hwcore.errors.InputError` listing the valid ones)::

    slurm:
      partition: gpu-h100        # --partition
      constraint: h100&ib        # --constraint (node features)
      gres: gpu:8                # --gres
      account: proj123           # --account
      qos: normal                # --qos
      time_limit_min: 30         # --time, minutes (default: from the cell timeout)
      nodes: 2                   # --nodes
      ntasks: 16                 # --ntasks (ranks of a multi-process cell)
      ntasks_per_node: 8         # --ntasks-per-node
      cpus_per_task: 12          # --cpus-per-task
      mem_gb: 64                 # --mem, per node, GiB
      launcher: srun             # multi-rank launch: srun (one rank per task) or torchrun (one agent per node)
      ranks_param: nprocs        # per cell: ntasks = the cell's value of this notebook parameter
                                 # (nodes = ceil(ntasks / ntasks_per_node) when ntasks_per_node is set),
                                 # so a grid over nprocs becomes 1-, 2-, 4-, ... rank jobs
      max_parallel: 4            # array throttle: at most N tasks of this array at once (--array=0-9%4)
      extra_args: ["--exclusive"]   # more sbatch options, passed verbatim

Multi-process cells (``ntasks``, ``nodes`` or ``ntasks_per_node`` > 1): the job script sets
``MASTER_ADDR`` (first host of ``$SLURM_JOB_NODELIST``), ``MASTER_PORT`` (from
the job id) and launches every rank with ``srun`` (``RANK`` =
``$SLURM_PROCID``, ``WORLD_SIZE`` = ``$SLURM_NTASKS``, ``LOCAL_RANK`` =
``$SLURM_LOCALID``: torch.distributed's ``env://`` contract) or with
``torchrun`` under ``srun --ntasks-per-node=1`` (c10d rendezvous at
``MASTER_ADDR:MASTER_PORT``). Every rank executes the notebook; rank 0 writes
to the shared store and the run's notebook directory, the other ranks to a
per-rank side store under the group folder, so the shared store holds one set
of records per cell.

The package: :mod:`~hweval.slurm.spec` (the ``slurm:`` mapping),
:mod:`~hweval.slurm.scripts` (job arrays and their scripts),
:mod:`~hweval.slurm.scheduler` (sbatch / squeue / jobcomp / sacct / scancel
adapters), :mod:`~hweval.slurm.poller` (state polling and the poller's records),
:mod:`~hweval.slurm.ledger` (submitted jobs that outlive a killed submitter)
and :mod:`~hweval.slurm.backend` (:func:`run_plan`); their public names are
re-exported here.
"""

from __future__ import annotations

from hweval.slurm.backend import run_plan
from hweval.slurm.ledger import Ledger, SlurmJobLive, reconcile
from hweval.slurm.poller import LOST_AFTER_POLLS, POLL_S, RECORD_GRACE_S, StatePoller, record_for, wait
from hweval.slurm.scheduler import (
    ABNORMAL,
    FINAL_STATUS,
    PENDING_STATES,
    TaskState,
    jobcomp_states,
    require_slurm,
    sacct_states,
    sbatch_submit,
    sbatch_test,
    scancel,
    scontrol_config,
    squeue_states,
)
from hweval.slurm.scripts import Group, make_groups, python_executable, render_job_script
from hweval.slurm.spec import (
    LAUNCHERS,
    MANAGED_OPTIONS,
    SPEC_KEYS,
    STARTUP_MARGIN_S,
    SlurmSpec,
    cell_spec,
    node_spec,
    time_limit_min,
    validate_plan,
)

__all__ = [
    "ABNORMAL", "FINAL_STATUS", "LAUNCHERS", "LOST_AFTER_POLLS", "MANAGED_OPTIONS", "PENDING_STATES", "POLL_S",
    "RECORD_GRACE_S", "SPEC_KEYS", "Ledger", "SlurmJobLive", "reconcile", "STARTUP_MARGIN_S", "Group", "SlurmSpec", "StatePoller", "TaskState",
    "cell_spec", "jobcomp_states", "make_groups", "node_spec", "python_executable", "record_for",
    "render_job_script", "require_slurm", "run_plan", "sacct_states", "sbatch_submit", "sbatch_test", "scancel",
    "scontrol_config", "squeue_states", "time_limit_min", "validate_plan", "wait",
]
