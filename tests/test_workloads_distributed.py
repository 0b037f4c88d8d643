"""Data-parallel workloads: N gloo processes on loopback give the loss of one process with the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import workloads
from hwcore.store import Store
from workloads.distributed import free_port

BASE = {"preset": "tiny", "threads": 1, "max_steps": 6, "eval_every": 3, "batch_size": 8}


def _losses(d):
    return [p["loss"] for p in d["loss_curve"]], [p["train_loss"] for p in d["loss_curve"][1:]]


@pytest.fixture(scope="module")
def single():
    return workloads.run("transformer_lm", BASE, target_loss=1e-9, record=False).to_json()


def test_ddp_two_processes_match_one_process(single, store_path):
    d = workloads.run("transformer_lm", {**BASE, "nprocs": 2}, target_loss=1e-9, store=store_path).to_json()
    assert d["status"] == "ok" and d["world_size"] == 2 and d["steps"] == 6
    ev1, tr1 = _losses(single)
    ev2, tr2 = _losses(d)
    np.testing.assert_allclose(ev2, ev1, rtol=1e-4)
    np.testing.assert_allclose(tr2, tr1, rtol=1e-4)
    assert d["breakdown_s"]["communication"] > 0
    assert any("overlaps backward" in n for n in d["breakdown_notes"])
    assert len(Store(store_path).records(kind="workload")) == 1  # one record for the whole run


@pytest.mark.slow
@pytest.mark.parametrize("extra", [{"overlap_comm": False}, {"strategy": "fsdp"}])
def test_no_overlap_ddp_and_fsdp_match_one_process(single, extra):
    d = workloads.run("transformer_lm", {**BASE, "nprocs": 2, **extra}, target_loss=1e-9, record=False).to_json()
    assert d["status"] == "ok" and d["world_size"] == 2
    np.testing.assert_allclose(_losses(d)[0], _losses(single)[0], rtol=1e-4)


def test_fsdp_with_checkpointing_is_refused():
    with pytest.raises(workloads.runner.InputError, match="not implemented for strategy=fsdp"):
        workloads.run("mlp_regressor", {"preset": "tiny", "nprocs": 2, "strategy": "fsdp", "checkpoint_every": 2,
                                        "max_steps": 2}, record=False)


@pytest.mark.parametrize("launcher", ["torchrun", pytest.param("slurm", marks=pytest.mark.slow)])
def test_externally_launched_ranks_join_one_world(launcher, store_path, single):
    """As torchrun / srun start it: each rank runs `hweval train`; rank 0 prints and records."""
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, HWEVAL_STORE=str(store_path))
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"):
            env.pop(k, None)
        if launcher == "torchrun":
            env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank))
        else:
            env.update(SLURM_PROCID=str(rank), SLURM_NTASKS="2", SLURM_LOCALID=str(rank), SLURM_NNODES="1",
                       SLURM_JOB_ID="1234")
        args = [f"--set={k}={v}" for k, v in BASE.items()]
        procs.append(subprocess.Popen([sys.executable, "-m", "hweval", "train", "transformer_lm", *args,
                                       "--target-loss", "1e-9", "--json"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-500:] for o in outs]
    d = json.loads(outs[0][0])
    assert outs[1][0].strip() == ""
    assert d["world_size"] == 2 and d["params"]["nprocs"] == 2
    np.testing.assert_allclose(_losses(d)[0], _losses(single)[0], rtol=1e-4)
    assert len(Store(store_path).records(kind="workload")) == 1
