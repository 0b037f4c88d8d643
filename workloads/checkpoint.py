"""Checkpoints: the backend's state (weights, optimizer, LR schedule, RNG) + the loop's position.

One file per checkpoint, ``ckpt.pt`` in the checkpoint directory, written to
a temporary name, fsync'd and atomically renamed, so a run killed mid-save
keeps the previous checkpoint. Data order needs no state: batches are a pure
function of ``(seed, step)`` (:mod:`workloads.data`). Save and restore are
timed with the host clock (restore includes loading into the live model).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from hwcore.errors import InputError

FILENAME = "ckpt.pt"


def save(directory: str | os.PathLike[str], backend: Any, loop: dict[str, Any]) -> float:
    """Write the checkpoint; returns the seconds it took."""
    import torch

    t0 = time.perf_counter()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{FILENAME}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        torch.save({"backend": backend.state(), "loop": loop, "framework": backend.framework}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, d / FILENAME)
    return time.perf_counter() - t0


def restore(directory: str | os.PathLike[str], backend: Any) -> tuple[dict[str, Any], float]:
    """Load the checkpoint into ``backend``; returns (loop state, seconds)."""
    import torch

    path = Path(directory) / FILENAME
    if not path.is_file():
        raise InputError(f"resume_from: no checkpoint at {path}")
    t0 = time.perf_counter()
    blob = torch.load(path, map_location="cpu", weights_only=False)
    if blob.get("framework") != backend.framework:
        raise InputError(f"resume_from: checkpoint is from framework {blob.get('framework')!r}, "
                         f"this run uses {backend.framework!r}")
    try:
        backend.load_state(blob["backend"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise InputError(f"resume_from: checkpoint does not fit this config: {str(exc).splitlines()[0]}") from exc
    return blob["loop"], time.perf_counter() - t0
