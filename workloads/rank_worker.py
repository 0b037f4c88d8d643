"""One rank of a multi-process training run: ``python -m workloads.rank_worker TMPDIR``.

:func:`workloads.distributed.launch` starts one of these per rank with the
torchrun-style environment set; each trains through
:func:`workloads.runner.train_local` and rank 0 writes the result JSON that the
launcher reads. A module of its own so that ``distributed`` (process groups,
launch) never imports ``runner`` (the training loop), which imports it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hwcore.errors import InputError
from workloads.runner import train_local


def _worker(tmp: str) -> int:
    spec = json.loads((Path(tmp) / "cfg.json").read_text())
    threads = os.environ.get("HWEVAL_WORKER_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
    try:
        result = train_local(spec["name"], spec["cfg"])
    except InputError as exc:
        if os.environ.get("RANK") == "0":
            (Path(tmp) / "result.json").write_text(json.dumps({"input_error": str(exc)}))
        return 0
    if os.environ.get("RANK") == "0":
        (Path(tmp) / ".result.json").write_text(json.dumps(result, default=str))
        os.replace(Path(tmp) / ".result.json", Path(tmp) / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1]))
