"""Validate the memory model (hwmodels.predict.memory) against published peak memory per accelerator.

Reads ``data/reference/memory_runs.csv``: public training runs that state their
peak device memory with their whole layout. Each row is predicted with the
layout it states (nothing searched) and the predicted bytes are compared with
the published peak. The memory model has no parameter fitted on these rows
(its allowances, 1 GiB fixed and 10% fragmentation, are stated in
``hwmodels/predict/memory.py`` and were set before any row was read), so every
row is held out.

What is compared depends on what the source measured (``memory_statistic``):

* ``max_allocated`` (``torch.cuda.max_memory_allocated``: live tensors): the
  model's weights + grads + optimizer + activations, no buffers;
* ``max_reserved`` (``torch.cuda.max_memory_reserved``: the caching
  allocator's segments): that plus the fragmentation allowance (the CUDA
  context and NCCL's own buffers are outside the allocator);
* ``nvidia-smi`` / ``other`` (device-level use): the model's total.

Writes the held-out error to ``data/reference/memory_error.json``, which the
predictor's memory interval reads (``hwmodels.predict.predictor``).

The fit verdict is also scored both ways on ``data/reference/memory_boundary.csv``:
published configurations reported to run out of memory, beside the nearest ones
of the same source that ran (``outcome`` oom | ran). Peak-memory figures only ever
come from runs that fit; these rows say where the capacity actually was. For each,
the model's estimate over the capacity; the point verdict (fits when at most 1)
and the search's memory-safe rule (fits with the q90 error above as headroom)
against the outcome. Nothing is fitted on these rows either.

    .venv/bin/python benchmarks/memory_validation.py [--quiet] [--no-write]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hwmodels.catalog import default_catalog  # noqa: E402
from hwmodels.errors import ModelInputError  # noqa: E402
from hwmodels.predict.calibration import calibrate  # noqa: E402
from hwmodels.predict.layout import Layout  # noqa: E402
from hwmodels.predict.memory import FIXED_BUFFER_BYTES, GiB, MemoryEstimate, RECOMPUTE, SHARDINGS  # noqa: E402
from hwmodels.predict.predictor import step_times  # noqa: E402
from hwmodels.predict.spec import parse_spec  # noqa: E402
from predictor_validation import (DOTS_SELECTIVE, HP_SAVES, KORTHIKANTI_SELECTIVE, attention_core, family,  # noqa: E402
                                  torchtitan_op_sac_share)

RUNS = ROOT / "data" / "reference" / "memory_runs.csv"
BOUNDARY = ROOT / "data" / "reference" / "memory_boundary.csv"
OUTCOMES = ("ran", "oom")
OUT = ROOT / "data" / "reference" / "memory_error.json"
STATISTICS = ("max_allocated", "max_reserved", "nvidia-smi", "other")
#: the quantile of |error| the predictor's memory interval carries
LEVEL = 0.9


def comparable_bytes(mem: MemoryEstimate, statistic: str) -> float:
    """The part of the model's estimate the published statistic measures (module docstring)."""
    body = mem.weights + mem.grads + mem.optimizer + mem.activations
    if statistic == "max_allocated":
        return body
    if statistic == "max_reserved":
        return body + max(mem.buffers - FIXED_BUFFER_BYTES, 0.0)
    return mem.total


def _int(row: dict, col: str, default: int | None = None) -> int:
    v = (row.get(col) or "").strip()
    if not v:
        if default is None:
            raise ValueError(f"{col}: empty")
        return default
    return int(float(v))


def layout_of(row: dict, spec) -> tuple[Layout, str]:
    """The layout a row states, and how its recompute column was read. ValueError when a field is missing or
    inconsistent."""
    n = _int(row, "accelerators")
    dp, tp, pp = _int(row, "dp"), _int(row, "tp", 1), _int(row, "pp", 1)
    cp, v, mb = _int(row, "cp", 1), _int(row, "interleave", 1), _int(row, "micro_batch")
    if dp * tp * pp * cp != n:
        raise ValueError(f"dp x tp x pp x cp = {dp * tp * pp * cp} != accelerators {n}")
    sh = (row.get("sharding") or "").strip()
    rc = (row.get("activation_checkpointing") or "").strip()
    if sh not in SHARDINGS:
        raise ValueError(f"sharding {sh!r} not one of {', '.join(SHARDINGS)}")
    if rc not in RECOMPUTE:
        raise ValueError(f"activation_checkpointing {rc!r} not one of {', '.join(RECOMPUTE)}")
    if sh == "none" and dp > 1:
        sh = "ddp"
    prec = (row.get("precision") or "bf16").strip()
    fam = family(row.get("framework", ""))
    how = rc
    extra: dict = {}
    if rc == "selective" and fam not in KORTHIKANTI_SELECTIVE:
        if fam == "torchtitan" and "layer-level" not in row.get("source_detail", "").lower():
            share = torchtitan_op_sac_share(spec)
            extra = dict(recompute="full", recompute_layers=round(share, 3))
            how = f"op-level SAC (priced as the time validation does: full recompute of {share:.0%} of the layers)"
        else:
            raise ValueError(f"'selective' of framework family {fam!r} has no stated memory meaning")
    elif rc == "selective" and fam in DOTS_SELECTIVE:
        extra = dict(selective_saves="dots")
        how = "selective (dots saved)"
    lay = Layout(dp=dp, tp=tp, pp=pp, cp=cp, interleave=v if pp > 1 else 1, micro_batch=mb, sharding=sh,
                 sequence_parallel=(row.get("sequence_parallel") or "").strip() == "true", precision=prec,
                 quantized_saves=fam not in HP_SAVES, **{"recompute": rc, **extra})
    return lay, how


def stated_memory(r: dict, catalog, cals: dict) -> tuple[Layout, str, MemoryEstimate]:
    """The row's stated layout, how its recompute column was read, and the memory model's estimate for it
    (``cals``: calibrations by hardware, filled as needed). ValueError / ModelInputError for an unusable row."""
    spec = parse_spec(r["model"]).with_seq_len(_int(r, "seq_len"))
    lay, how = layout_of(r, spec)
    hw = r["hardware"]
    if hw not in cals:
        cals[hw] = calibrate(catalog.get(hw))
    gb = _int(r, "global_batch", lay.dp * lay.micro_batch)
    mem = step_times(spec, cals[hw], lay, global_batch=gb, memory_only=True, attention=attention_core(r)).memory
    return lay, how, mem


def usable(rows: list[dict], catalog, column: str, choices: tuple[str, ...], skipped: list[str]):
    """(row, its ``column`` value, layout, how recompute was read, memory estimate) for each row that can be
    predicted; a reason for each other row goes to ``skipped``."""
    cals: dict = {}
    for r in rows:
        rid, hw, val = r["run_id"], r["hardware"], (r.get(column) or "").strip()
        if hw not in catalog:
            skipped.append(f"{rid}: hardware {hw!r} not in the catalog")
            continue
        if val not in choices:
            skipped.append(f"{rid}: {column} {val!r} not one of {', '.join(choices)}")
            continue
        try:
            lay, how, mem = stated_memory(r, catalog, cals)
        except (ModelInputError, ValueError) as exc:
            skipped.append(f"{rid}: {exc}")
            continue
        yield r, val, lay, how, mem


def predict(rows: list[dict], catalog) -> tuple[list[dict], list[str]]:
    """Each usable row with its predicted and published bytes; reasons for the rows skipped."""
    out: list[dict] = []
    skipped: list[str] = []
    for r, stat, lay, how, mem in usable(rows, catalog, "memory_statistic", STATISTICS, skipped):
        rid, hw = r["run_id"], r["hardware"]
        pub_GiB = float(r["peak_memory_GiB"])
        pred_GiB = comparable_bytes(mem, stat) / GiB
        out.append(dict(id=rid, hw=hw, stat=stat, fam=family(r.get("framework", "")), recompute=how, layout=lay,
                        pub_GiB=pub_GiB, pred_GiB=pred_GiB, err=pred_GiB / pub_GiB - 1.0,
                        parts={k: round(v, 2) for k, v in mem.to_dict().items() if k.endswith("_GiB")},
                        fits=mem.fits))
    return out, skipped


def boundary(rows: list[dict], catalog, margin: float | None) -> tuple[dict, list[str]]:
    """The fit verdict against published outcomes (module docstring): per row the estimate over the capacity; the
    point verdict's and the memory-safe rule's (``margin``) confusion counts; reasons for the rows skipped."""
    out: list[dict] = []
    skipped: list[str] = []
    for r, outcome, _, how, mem in usable(rows, catalog, "outcome", OUTCOMES, skipped):
        # a part with more memory than the catalog's (the 96GB H100 of Meta's Grand Teton) states its own
        cap = float(r["device_memory_GiB"]) * GiB if (r.get("device_memory_GiB") or "").strip() else mem.capacity
        out.append(dict(run_id=r["run_id"], hardware=r["hardware"], outcome=outcome, recompute=how,
                        predicted_GiB=round(mem.total / GiB, 2), capacity_GiB=round(cap / GiB, 2),
                        ratio=round(mem.total / cap, 4)))

    def confusion(limit: float) -> dict:
        """Counts of (outcome, verdict) with 'fits' when estimate / capacity <= limit."""
        c = {"oom_said_fits": 0, "oom_said_not": 0, "ran_said_fits": 0, "ran_said_not": 0}
        for b in out:
            c[f"{b['outcome']}_said_{'fits' if b['ratio'] <= limit else 'not'}"] += 1
        return c

    oom = [b["ratio"] for b in out if b["outcome"] == "oom"]
    ran = [b["ratio"] for b in out if b["outcome"] == "ran"]
    res = {"n": len(out), "oom": len(oom), "ran": len(ran), "point_verdict": confusion(1.0),
           "oom_ratio_range": [min(oom), max(oom)] if oom else None,
           "ran_ratio_range": [min(ran), max(ran)] if ran else None, "rows": out}
    if margin is not None:
        res["memory_safe_margin"] = margin
        res["memory_safe_verdict"] = confusion(1.0 / (1.0 + margin))
    return res, skipped


def quant(errs: list[float]) -> dict:
    """|error| quantiles of ratios, symmetric in log space (|error| = max(p/q, q/p) - 1)."""
    a = sorted(math.exp(abs(math.log1p(e))) - 1.0 for e in errs)
    if not a:
        return {"n": 0}

    def q(p: float) -> float:
        return a[min(len(a) - 1, max(0, math.ceil(p * len(a)) - 1))]
    return {"n": len(a), "median": statistics.median(a), "q90": q(0.9), "max": a[-1],
            "median_signed": statistics.median(errs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quiet", action="store_true", help="no per-row table")
    ap.add_argument("--no-write", action="store_true", help=f"do not write {OUT.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    with open(RUNS, newline="") as f:
        rows = list(csv.DictReader(f))
    preds, skipped = predict(rows, default_catalog())
    if not args.quiet:
        print(f"{'run':52s} {'hardware':13s} {'statistic':13s} {'published':>9s} {'predicted':>9s} {'error':>7s}  "
              "layout")
        for p in preds:
            lay = p["layout"]
            print(f"{p['id'][:52]:52s} {p['hw']:13s} {p['stat']:13s} {p['pub_GiB']:9.1f} {p['pred_GiB']:9.1f} "
                  f"{p['err']:+7.1%}  dp{lay.dp} tp{lay.tp} pp{lay.pp} cp{lay.cp} mb{lay.micro_batch} "
                  f"{lay.sharding} {p['recompute']}")
    for s in skipped:
        print(f"skipped {s}")
    errs = [p["err"] for p in preds]
    overall = quant(errs)
    by = {name: {k: quant(v) for k, v in sorted(groups.items())} for name, groups in (
        ("per_hardware", _group(preds, "hw")), ("per_statistic", _group(preds, "stat")),
        ("per_framework", _group(preds, "fam")), ("per_recompute", _group(preds, lambda p: p["layout"].recompute)))}
    if overall["n"]:
        print(f"\nmemory per accelerator, {overall['n']} published runs (all held out: nothing fitted): median "
              f"|error| {overall['median']:.1%}, q90 {overall['q90']:.1%}, worst {overall['max']:.1%}, median signed "
              f"{overall['median_signed']:+.1%} (positive = the model predicts more memory than was used)")
        for name, groups in by.items():
            print(f"{name}: " + ", ".join(f"{k} {v['median']:.1%} / {v['max']:.1%} (n={v['n']})"
                                          for k, v in groups.items()))
        under = [p["id"] for p in preds if p["err"] < 0]
        print(f"rows the model under-predicts (the dangerous side: a layout said to fit may not): {len(under)}"
              + (f" ({', '.join(under)})" if under else ""))
        print(f"runs the model says do not fit though they ran: "
              f"{sum(not p['fits'] for p in preds)} of {len(preds)}")
    bnd = None
    if BOUNDARY.exists():
        with open(BOUNDARY, newline="") as f:
            brows = list(csv.DictReader(f))
        bnd, bskip = boundary(brows, default_catalog(), overall.get("q90"))
        for s_ in bskip:
            print(f"boundary: skipped {s_}")
        bnd["skipped"] = bskip
        if bnd["n"]:
            pv, sv = bnd["point_verdict"], bnd.get("memory_safe_verdict") or {}
            print(f"\nfit verdict on {bnd['n']} published outcomes ({bnd['oom']} out of memory, {bnd['ran']} ran; "
                  f"{BOUNDARY.name}): point estimate: {pv['oom_said_not']}/{bnd['oom']} OOM runs said not to fit, "
                  f"{pv['ran_said_fits']}/{bnd['ran']} runs that ran said to fit"
                  + (f"; memory-safe rule (+{bnd['memory_safe_margin']:.0%}): {sv['oom_said_not']}/{bnd['oom']} OOM "
                     f"runs flagged, {sv['ran_said_fits']}/{bnd['ran']} runs that ran kept" if sv else ""))
            print("estimate / capacity: OOM runs " + (", ".join(f"{x:.2f}" for x in sorted(
                b["ratio"] for b in bnd["rows"] if b["outcome"] == "oom")) or "none") + "; runs that ran " + (
                ", ".join(f"{x:.2f}" for x in sorted(b["ratio"] for b in bnd["rows"] if b["outcome"] == "ran"))
                or "none"))
    if not args.no_write and overall["n"]:
        OUT.write_text(json.dumps({
            "generated_by": "benchmarks/memory_validation.py",
            "method": ("each published run predicted with the layout it states; the part of the model's estimate the "
                       "published statistic measures (max_allocated: tensors; max_reserved: + fragmentation "
                       "allowance; device-level: + fixed buffers) against the published peak; nothing fitted, every "
                       "row held out; |error| = max(pred/pub, pub/pred) - 1"),
            "level": LEVEL, "band_rel": overall["q90"], "overall": overall, **by,
            "skipped": skipped,
            "rows": [{"run_id": p["id"], "hardware": p["hw"], "statistic": p["stat"],
                      "published_GiB": round(p["pub_GiB"], 2), "predicted_GiB": round(p["pred_GiB"], 2),
                      "error": round(p["err"], 4), "parts_GiB": p["parts"]} for p in preds],
            **({"boundary": bnd} if bnd is not None else {}),
        }, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


def _group(preds: list[dict], key) -> dict[str, list[float]]:
    g: dict[str, list[float]] = defaultdict(list)
    for p in preds:
        g[key(p) if callable(key) else p[key]].append(p["err"])
    return g


if __name__ == "__main__":
    raise SystemExit(main())
