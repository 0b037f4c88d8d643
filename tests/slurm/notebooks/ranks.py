# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# Test notebook for multi-process cells under Slurm: every rank joins one gloo
# process group through torch.distributed's env:// contract (MASTER_ADDR,
# MASTER_PORT, RANK, WORLD_SIZE set by the job script) and all-reduces rank + 1.

# %% tags=["parameters"]
timeout_s: float = 60.0  # process-group timeout

# %%
import datetime
import os

import torch
import torch.distributed as dist

from hwcore.store import Record, Store

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
dist.destroy_process_group()
Store().append(Record(kind="collective", name="slurm_allreduce_check",
                      metrics={"rank": rank, "world_size": world, "sum": float(t.item()),
                               "master_addr": os.environ["MASTER_ADDR"], "master_port": os.environ["MASTER_PORT"]}))
