"""Step-time overhead of the workload suite against a bare training loop of the same model.

Method: one process runs ``workloads.run`` (evaluation only at the start and
at the last step) and, through its per-step ``callback``, one step of a bare
loop after every suite step: the same model (same registry module, seed,
data function, AdamW implementation, grad clip, LR schedule, and
``loss.item()`` per step, which any loop needs to see a NaN) with no phase
timers, memory probe or bookkeeping. The two loops thus alternate step by
step and see the same machine load. The suite's step is the wall time
between two callback returns minus nothing (its whole loop iteration:
data, step, phase timers, RSS probe, bookkeeping); the bare step is timed
around the bare call. Warm-up steps and the final (eval) step are dropped.
Overhead = median(suite) / median(bare) - 1 per round; the figure is the
median over ``--rounds`` rounds (target < 3%).

    .venv/bin/python benchmarks/workload_overhead.py [--rounds 5] [--steps 100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import workloads  # noqa: E402
from workloads import registry  # noqa: E402
from workloads.runner import WARMUP_STEPS  # noqa: E402

CASES = {
    # name: (workload, params)
    "transformer_lm tiny (compute-bound-ish)": ("transformer_lm", {"preset": "tiny"}),
    "transformer_lm small": ("transformer_lm", {"preset": "small"}),
    "mlp_regressor tiny (latency-bound)": ("mlp_regressor", {"preset": "tiny"}),
}


class BareLoop:
    """A hand-written training loop over the same model and data, one step per call."""

    def __init__(self, name: str, params: dict) -> None:
        cfg = self.cfg = registry.config_from_params(name, params)
        w = registry.get(name)
        torch.manual_seed(cfg.seed)
        self.split = w.split(cfg)
        self.model = w.torch_module(cfg, self.split)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                     foreach=True)
        warm = cfg.warmup_steps
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt,
                                                       lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
        self.model.train()
        self.params = list(self.model.parameters())  # as any tuned loop does (no module walk per step)

    def step(self, step: int) -> float:
        cfg = self.cfg
        x, y = (torch.from_numpy(a) for a in self.split.batch(cfg.seed, step, cfg.batch_size))
        loss = self.model.loss(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.sched.step()
        return loss.item()


def one_round(name: str, params: dict, steps: int) -> tuple[float, float]:
    """(median suite step s, median bare step s), interleaved step by step."""
    bare = BareLoop(name, {**params, "max_steps": steps})
    suite_t: list[float] = []
    bare_t: list[float] = []
    last = [None]

    def callback(step: int, loss: float) -> None:
        now = time.perf_counter()
        if last[0] is not None:
            suite_t.append(now - last[0])
        t0 = time.perf_counter()
        bare.step(step)
        bare_t.append(time.perf_counter() - t0)
        last[0] = time.perf_counter()

    res = workloads.run(name, {**params, "max_steps": steps, "eval_every": steps, "eval_batches": 1,
                               "stop_at_target": False}, record=False, callback=callback)
    assert res.status == "ok", res.error
    # suite_t[i] is the suite's step i+2 (starts after callback i+1); drop warm-up and the eval step
    s = suite_t[WARMUP_STEPS:-1]
    b = bare_t[WARMUP_STEPS + 1:-1]
    return statistics.median(s), statistics.median(b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: less noise when shared)")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads={args.threads}, rounds={args.rounds}, steps={args.steps} "
          f"(first {WARMUP_STEPS} and the eval step excluded), interleaved step by step")
    worst = 0.0
    for label in args.cases:
        name, params = CASES[label]
        params = {**params, "threads": args.threads}
        ratios, suite_t, bare_t = [], [], []
        for _ in range(args.rounds):
            st, bt = one_round(name, params, args.steps)
            suite_t.append(st)
            bare_t.append(bt)
            ratios.append(st / bt)
        med = statistics.median(ratios)
        q = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [med, med, med]
        worst = max(worst, med - 1)
        print(f"{label:42s} suite {statistics.median(suite_t) * 1e3:8.3f} ms/step  bare "
              f"{statistics.median(bare_t) * 1e3:8.3f} ms/step  overhead median {med - 1:+.2%} "
              f"(IQR of round ratios {q[0] - 1:+.2%} .. {q[2] - 1:+.2%})")
    print(f"worst median overhead {worst:+.2%}  target < 3%: {'PASS' if worst < 0.03 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
