"""A picklable torch ``IterableDataset`` over step-indexed batches (for DataLoader workers, fork or spawn)."""

from __future__ import annotations

import torch.utils.data as tud


def identity(b):
    return b


class StepDataset(tud.IterableDataset):
    """Batches of steps ``start+1 .. stop``; worker ``w`` of ``n`` makes every ``n``-th step from ``start+1+w``."""

    def __init__(self, split, seed: int, start: int, stop: int, batch_size: int, rank: int, world: int) -> None:
        self.args = (split, seed, start, stop, batch_size, rank, world)

    def __iter__(self):
        split, seed, start, stop, bs, rank, world = self.args
        info = tud.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        for s in range(start + 1 + wid, stop + 1, nw):
            yield split.batch(seed, s, bs, rank, world)
