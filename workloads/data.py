"""Real data that exists on every machine, no downloads.

* :func:`stdlib_corpus`: a byte-level text corpus from the Python standard
  library's own ``*.py`` files (sorted file list; a file goes to the held-out
  eval split when ``crc32(name) % 10 == 0``, so the split is by file and does
  not depend on the corpus size limit). Recorded with a sha256 digest, since
  each Python version ships different files.
* :func:`co2_series`: the Mauna Loa weekly CO2 series shipped with
  statsmodels (``statsmodels.datasets.co2``), gaps linearly interpolated; the
  last ``eval_fraction`` of the series is the held-out window.
* :func:`fair_tabular`: the ``fair`` data set shipped with statsmodels (Fair
  1978, 6366 survey rows); predicts ``yrs_married`` from the other columns.

Batches are pure functions of ``(seed, step)``: the global batch of step ``s``
is drawn by ``numpy.random.default_rng([seed, s])`` and each data-parallel
rank takes its contiguous slice. Resuming at step ``k`` therefore replays the
exact data order, and N processes see together exactly the batch one process
sees.
"""

from __future__ import annotations

import functools
import hashlib
import sysconfig
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Split:
    """Arrays of one workload: sampled into batches by :meth:`batch`."""

    kind: str  # "tokens" | "windows" | "rows"
    train: tuple[np.ndarray, ...]
    eval: tuple[np.ndarray, ...]
    info: dict[str, Any] = field(default_factory=dict)
    seq_len: int = 0  # token windows: tokens per sample

    # -- sampling ---------------------------------------------------------------------
    def _n(self, arrays: tuple[np.ndarray, ...]) -> int:
        if self.kind == "tokens":
            return len(arrays[0]) - self.seq_len - 1
        return len(arrays[0])

    def _take(self, arrays: tuple[np.ndarray, ...], idx: np.ndarray) -> tuple[np.ndarray, ...]:
        if self.kind == "tokens":
            toks = arrays[0]
            win = idx[:, None] + np.arange(self.seq_len + 1)[None, :]
            chunk = toks[win].astype(np.int64)
            return chunk[:, :-1], chunk[:, 1:]
        return tuple(a[idx] for a in arrays)

    def global_indices(self, seed: int, step: int, batch_size: int) -> np.ndarray:
        rng = np.random.default_rng([seed, step])
        return rng.integers(0, self._n(self.train), size=batch_size)

    def batch(self, seed: int, step: int, batch_size: int, rank: int = 0, world: int = 1) -> tuple[np.ndarray, ...]:
        """This rank's slice of the global training batch of ``step``."""
        idx = self.global_indices(seed, step, batch_size)
        per = batch_size // world
        return self._take(self.train, idx[rank * per:(rank + 1) * per])

    def eval_batches(self, batch_size: int, n_batches: int) -> list[tuple[np.ndarray, ...]]:
        """Fixed held-out batches: evenly spaced windows/rows over the eval split."""
        n = self._n(self.eval)
        total = min(n, batch_size * n_batches)
        idx = np.linspace(0, n - 1, total).astype(np.int64)
        return [self._take(self.eval, idx[i:i + batch_size]) for i in range(0, total, batch_size)]


# ---------------------------------------------------------------------------------
# corpus: the standard library's own source
# ---------------------------------------------------------------------------------
def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.glob("*.py") if p.is_file())


@functools.lru_cache(maxsize=8)
def stdlib_corpus(max_bytes: int = 2_000_000, vocab: int = 256) -> Split:
    """Byte-level corpus; ``vocab < 256`` keeps the ``vocab - 1`` most frequent train bytes, the rest -> UNK."""
    files = stdlib_files()
    train_parts, eval_parts, n_train, n_eval = [], [], 0, 0
    eval_budget = max(max_bytes // 9, 1)
    used = []
    for p in files:
        data = p.read_bytes()
        is_eval = zlib.crc32(p.name.encode()) % 10 == 0
        if is_eval and n_eval < eval_budget:
            eval_parts.append(data)
            n_eval += len(data)
            used.append(p.name)
        elif not is_eval and n_train < max_bytes:
            train_parts.append(data)
            n_train += len(data)
            used.append(p.name)
        if n_train >= max_bytes and n_eval >= eval_budget:
            break
    train = np.frombuffer(b"".join(train_parts)[:max_bytes], dtype=np.uint8)
    evals = np.frombuffer(b"".join(eval_parts)[:eval_budget], dtype=np.uint8)
    if vocab < 256:
        counts = np.bincount(train, minlength=256)
        keep = np.argsort(-counts, kind="stable")[: vocab - 1]
        lut = np.full(256, vocab - 1, dtype=np.uint8)  # UNK = vocab - 1
        lut[keep] = np.arange(vocab - 1, dtype=np.uint8)
        train, evals = lut[train], lut[evals]
    digest = hashlib.sha256(train.tobytes() + b"|" + evals.tobytes()).hexdigest()[:16]
    info = {
        "name": "python-stdlib-bytes",
        "source": str(Path(sysconfig.get_paths()["stdlib"])),
        "files": len(used),
        "train_bytes": int(train.size),
        "eval_bytes": int(evals.size),
        "vocab": vocab,
        "sha256_16": digest,
        "split": "by file: crc32(name) % 10 == 0 -> eval",
    }
    return Split(kind="tokens", train=(train,), eval=(evals,), info=info)


def lm_split(max_bytes: int, vocab: int, seq_len: int) -> Split:
    base = stdlib_corpus(max_bytes, vocab)
    return Split(kind="tokens", train=base.train, eval=base.eval, info=base.info, seq_len=seq_len)


# ---------------------------------------------------------------------------------
# series: Mauna Loa CO2 (statsmodels)
# ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def co2_series(context: int = 64, horizon: int = 8, eval_fraction: float = 0.2) -> Split:
    """Windows of the weekly CO2 series: inputs ``context`` weeks, targets the next ``horizon``.

    Each window is expressed relative to its last observed value (so the trend
    does not leave the training range) and scaled by the train split's std of
    1-week differences times sqrt(horizon) (a random walk's spread at the
    horizon). The naive "no change" forecast then has an eval MSE of
    ``info['naive_mse']`` (the baseline a model must beat).
    """
    import statsmodels.api as sm

    s = sm.datasets.co2.load_pandas().data["co2"].interpolate(limit_direction="both").to_numpy(np.float64)
    n_eval = int(len(s) * eval_fraction)
    train_s, eval_s = s[: len(s) - n_eval], s[len(s) - n_eval - context:]
    scale = float(np.std(np.diff(train_s)) * np.sqrt(horizon))

    def windows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(x) - context - horizon + 1
        idx = np.arange(n)[:, None]
        ctx = x[idx + np.arange(context)[None, :]]
        fut = x[idx + context + np.arange(horizon)[None, :]]
        last = ctx[:, -1:]
        return ((ctx - last) / scale).astype(np.float32)[..., None], ((fut - last) / scale).astype(np.float32)

    tr, ev = windows(train_s), windows(eval_s)
    info = {
        "name": "statsmodels.datasets.co2",
        "points": len(s),
        "train_windows": len(tr[0]),
        "eval_windows": len(ev[0]),
        "context": context,
        "horizon": horizon,
        "naive_mse": float(np.mean(ev[1] ** 2)),
        "split": f"chronological; last {eval_fraction:.0%} of the series held out",
    }
    return Split(kind="windows", train=tr, eval=ev, info=info)


# ---------------------------------------------------------------------------------
# tabular: Fair's affairs survey (statsmodels)
# ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=2)
def fair_tabular(target: str = "yrs_married") -> Split:
    """Standardized features/target; every 5th row (deterministic) held out.

    ``info['ols_mse']`` is ordinary least squares' held-out MSE (fit on the
    train rows), the linear baseline for the MLP's target.
    """
    import statsmodels.api as sm

    df = sm.datasets.fair.load_pandas().data
    y = df[target].to_numpy(np.float64)
    x = df.drop(columns=[target]).to_numpy(np.float64)
    is_eval = np.arange(len(df)) % 5 == 0
    mu, sd = x[~is_eval].mean(0), x[~is_eval].std(0)
    ymu, ysd = y[~is_eval].mean(), y[~is_eval].std()
    x, y = (x - mu) / sd, (y - ymu) / ysd
    xtr, ytr, xev, yev = x[~is_eval], y[~is_eval], x[is_eval], y[is_eval]
    a = np.c_[xtr, np.ones(len(xtr))]
    coef = np.linalg.lstsq(a, ytr, rcond=None)[0]
    ols = float(np.mean((np.c_[xev, np.ones(len(xev))] @ coef - yev) ** 2))
    info = {
        "name": "statsmodels.datasets.fair",
        "target": target,
        "features": int(x.shape[1]),
        "train_rows": int(len(xtr)),
        "eval_rows": int(len(xev)),
        "ols_mse": ols,
        "split": "row index % 5 == 0 -> eval",
    }
    f32 = np.float32
    return Split(kind="rows", train=(xtr.astype(f32), ytr.astype(f32)[:, None]),
                 eval=(xev.astype(f32), yev.astype(f32)[:, None]), info=info)


# ---------------------------------------------------------------------------------
# a torch DataLoader over step-indexed batches (the ``workers`` knob)
# ---------------------------------------------------------------------------------
def step_batches(split: Split, *, seed: int, start_step: int, stop_step: int, batch_size: int,
                 rank: int, world: int, workers: int) -> Iterator[tuple[np.ndarray, ...]]:
    """Batches for steps ``start_step+1 .. stop_step``; with ``workers > 0`` made in worker processes.

    Worker ``w`` makes the steps ``s`` with ``(s - start) % workers == w``;
    the DataLoader's in-order round robin then yields them in step order.
    """
    if workers == 0:
        for s in range(start_step + 1, stop_step + 1):
            yield split.batch(seed, s, batch_size, rank, world)
        return
    import sys

    import torch.utils.data as tud

    from workloads.torch.loader import StepDataset, identity

    # fork is unsafe once JAX's threads exist in this process; spawn then (workers re-import, slower start)
    mp = "spawn" if "jax" in sys.modules else None
    loader = tud.DataLoader(StepDataset(split, seed, start_step, stop_step, batch_size, rank, world),
                            batch_size=None, num_workers=workers, collate_fn=identity, prefetch_factor=2,
                            multiprocessing_context=mp)
    yield from loader
