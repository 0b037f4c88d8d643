"""Step-time overhead of the workload suite against a bare training loop of the same model.

Method: in one process, for ``--rounds`` rounds, run (order alternating per
round) (a) ``workloads.run`` for ``--steps`` steps with evaluation only at the
start and end, and (b) a bare loop: the same model (same registry module,
seed, data function, AdamW implementation, grad clip, LR schedule, and
``loss.item()`` per step, which any loop needs to see a NaN), without phase
timers, memory sampling or bookkeeping. Both exclude their first
``WARMUP_STEPS`` steps. The suite's figure is its ``loop_step_s``: wall time
of the post-warm-up loop, bookkeeping included, evaluation excluded. The
overhead is ``median over rounds of (suite / bare) - 1`` (target < 3%).

    .venv/bin/python benchmarks/workload_overhead.py [--rounds 7] [--steps 40]
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


def bare_loop(name: str, params: dict, steps: int) -> float:
    """Mean seconds per post-warm-up step of a hand-written loop over the same model and data."""
    cfg = registry.config_from_params(name, {**params, "max_steps": steps})
    w = registry.get(name)
    torch.manual_seed(cfg.seed)
    split = w.split(cfg)
    model = w.torch_module(cfg, split)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    warm = cfg.warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0)
    model.train()
    t0 = None
    for step in range(1, steps + 1):
        if step == WARMUP_STEPS + 1:
            t0 = time.perf_counter()
        x, y = (torch.from_numpy(a) for a in split.batch(cfg.seed, step, cfg.batch_size))
        loss = model.loss(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        loss.item()
    return (time.perf_counter() - t0) / (steps - WARMUP_STEPS)


def suite_loop(name: str, params: dict, steps: int) -> float:
    res = workloads.run(name, {**params, "max_steps": steps, "eval_every": steps, "eval_batches": 1,
                               "stop_at_target": False}, record=False)
    assert res.status == "ok", res.error
    return res.loop_step_s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: less noise when shared)")
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads={args.threads}, rounds={args.rounds}, steps={args.steps} "
          f"(first {WARMUP_STEPS} excluded), interleaved, order alternating")
    worst = 0.0
    for label in args.cases:
        name, params = CASES[label]
        params = {**params, "threads": args.threads}
        ratios, suite_t, bare_t = [], [], []
        for r in range(args.rounds):
            if r % 2 == 0:
                s, b = suite_loop(name, params, args.steps), bare_loop(name, params, args.steps)
            else:
                b, s = bare_loop(name, params, args.steps), suite_loop(name, params, args.steps)
            suite_t.append(s)
            bare_t.append(b)
            ratios.append(s / b)
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
