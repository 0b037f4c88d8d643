# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# Test notebook for the Slurm backend: records one value, optionally sleeps first.

# %% tags=["parameters"]
value: int = 1  # recorded as metrics.value
sleep_s: float = 0.0  # seconds to sleep before recording
release_file: str = ""  # when set, sleep only while this file does not exist

# %%
import os
import time
from pathlib import Path

from hwcore.store import Record, Store

if sleep_s > 0 and not (release_file and Path(release_file).exists()):
    time.sleep(sleep_s)
Store().append(Record(kind="other", name="slurm_tiny", params={"value": value},
                      metrics={"value": value, "slurm_job": os.environ.get("HWEVAL_SLURM_JOB")}))
