"""``hweval predict``: step time, throughput, MFU, memory and cost of a training job on catalog hardware.

A thin shell over :func:`hwmodels.predict.predict_job` (the library entry
point the report and ``hweval cost`` call). Interface (issue 11, part 2)::

    hweval predict --hardware ID --accelerators N --model SPEC [--seq-len T] [--micro-batch M]
        [--global-batch B] [--precision bf16|fp8|fp16|fp32]
        [--sharding none|ddp|zero1|shard_grad_op|full_shard] [--tp N] [--pp N] [--interleave V] [--layout auto]
        [--activation-offload L]
        [--activation-checkpointing none|selective|full] [--tokens N] [--pricing MODE] [--framework FAMILY]
        [--json]
    hweval predict --batch SCENARIOS.csv [--json]

Layout fields that are not given are chosen by the layout search (``--layout
auto``, the default); ``--layout fixed`` requires every layout field. Batch
columns are the long options with underscores; empty cells take the
defaults. Every row is checked and predicted before anything is written: a bad
option or row is one error line naming the row and column, exit code 2.

Calibration source (a): kernel records of the node in the results store
(``$HWEVAL_STORE`` or ``data/results``: ``kind="kernel"``/``"collective"``
rows whose ``node_id`` is the hardware id) are used when present.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path
from typing import Any

import click

from hwcore import params as P
from hwcore.errors import InputError
from hwmodels.dtypes import PREDICT_PRECISIONS as PRECISIONS
SHARDINGS = ("none", "ddp", "zero1", "shard_grad_op", "full_shard")
RECOMPUTE = ("none", "selective", "full")
LAYOUTS = ("auto", "fixed")
MODES = ("on_demand", "reserved", "reserved_3y", "spot", "on_prem")
BOOLS = ("true", "false")
MATERIALIZED = "materialized"
#: the JSON's ``attention`` on a node with no published attention curve: its fused-attention rate is assumed
ASSUMED_ATTENTION = "fused, rate assumed"
#: the issue's interface, then two optional columns added with context parallelism: ``cp`` (context-parallel
#: degree: each sequence split over cp ranks; searched when absent) and ``tp_comm_overlap`` (TP collectives
#: pipelined with the GEMMs, as Transformer Engine userbuffers / async TP do; default false), and later
#: ``interleave`` (virtual pipeline chunks per rank, Megatron's interleaved 1F1B; searched among 1, 2, 4 when absent)
#: and ``activation_offload`` (layers per pipeline stage whose saved activations go to host memory, Megatron's
#: ``cpu_offloading_num_layers``; absent or 0: none stated, and the search may choose it beside recomputation where the
#: node has a host-link figure), and ``framework`` (the framework family the job will run, one the validation fitted:
#: its factors and its narrower band; default unknown), and the cluster the job runs on where it differs from the
#: catalog node: ``accelerators_per_node`` (a smaller board of the type, e.g. a 4-GPU HGX; its scale-up domain
#: shrinks with it where the catalog's is the node) and ``inter_node_gbps`` (the scale-out network per node, Gb/s one
#: direction; priced by the link model, not the curves measured on the catalog's network), and ``attention`` (the
#: attention implementation the framework runs: one of the node's published kernel curves, e.g. ``flash_attn_1``
#: or ``cudnn``, or ``materialized`` (score GEMMs and a softmax, before fused kernels); default the node's own), and
#: ``power_limit_w`` (a power limit per accelerator below the catalog TDP: compute rates at the published
#: sustained-clock ratio, ``hwmodels.predict.power``; default none)
COLUMNS = ("hardware", "accelerators", "model", "seq_len", "micro_batch", "global_batch", "precision", "sharding",
           "tp", "pp", "layout", "activation_checkpointing", "tokens", "pricing", "cp", "tp_comm_overlap",
           "interleave", "activation_offload", "framework", "accelerators_per_node", "inter_node_gbps", "attention",
           "power_limit_w")
INT_FIELDS = ("accelerators", "seq_len", "micro_batch", "global_batch", "tp", "pp", "cp", "interleave",
              "accelerators_per_node")
CHOICES = {"precision": PRECISIONS, "sharding": SHARDINGS, "activation_checkpointing": RECOMPUTE,
           "layout": LAYOUTS, "pricing": MODES, "tp_comm_overlap": BOOLS}
#: column -> its type (hwcore.params): positive integers, a positive finite token count, choices
TYPES: dict[str, P.Type] = {
    **{c: P.Int(min=1) for c in INT_FIELDS},
    "tokens": P.Float(min=0, min_open=True),
    "inter_node_gbps": P.Float(min=0, min_open=True),
    "power_limit_w": P.Float(min=0, min_open=True),
    "activation_offload": P.Int(min=0),
    **{c: P.Str(choices=tuple(v)) for c, v in CHOICES.items()},
}


def _scenario(raw: dict[str, Any], where: str, catalog: Any) -> dict[str, Any]:
    """Raw option strings -> typed scenario; errors name ``where`` + the column/option."""
    def name(col: str) -> str:  # an option is spelled with hyphens, a CSV column as it is
        return f"{where}{col.replace('_', '-') if where == '--' else col}"

    def err(col: str, msg: str) -> InputError:
        return InputError(f"{name(col)}: {msg}")

    out: dict[str, Any] = {}
    for col in COLUMNS:
        v = raw.get(col)
        if isinstance(v, str):
            v = v.strip()
            if v == "":
                v = None
        if v is None:
            out[col] = None
            continue
        if col in TYPES:
            # the one parameter type system (hwcore.params): same ranges and error shape as plans and registries
            out[col] = TYPES[col].parse(v, name(col))
        else:
            out[col] = str(v)
    for req in ("hardware", "accelerators", "model"):
        if out[req] is None:
            raise err(req, "required")
    if out["hardware"] not in catalog:
        raise err("hardware", f"unknown node {out['hardware']!r}; valid choices: {', '.join(sorted(catalog.ids()))}")
    from hwmodels.errors import ModelInputError
    from hwmodels.predict.spec import parse_spec
    try:
        out["spec"] = parse_spec(out["model"]).with_seq_len(out["seq_len"])
    except ModelInputError as exc:
        raise InputError(f"{where}{exc}") from None
    if out["pricing"]:
        node = catalog.get(out["hardware"])
        if out["pricing"] not in node.modes:
            raise err("pricing", f"{out['pricing']!r} has no price for {node.id}; valid choices: "
                                 f"{', '.join(node.modes) or '(none)'}")
    if out["framework"] is not None:
        from hwmodels.predict.predictor import framework_choice_error
        why = framework_choice_error(out["framework"])
        if why:
            raise err("framework", why)
    if out["layout"] == "fixed":
        missing = [c for c in ("tp", "pp", "sharding", "micro_batch", "activation_checkpointing") if out[c] is None]
        if missing:
            raise err("layout", f"'fixed' needs {', '.join(missing)} too (or use --layout auto)")
    tp, pp, cp = out["tp"] or 1, out["pp"] or 1, out["cp"] or 1
    if out["accelerators"] % (tp * pp * cp):
        col = "cp" if out["cp"] else ("tp" if out["tp"] else "pp")
        raise err(col, f"tp x pp x cp ({tp} x {pp} x {cp}) must divide accelerators ({out['accelerators']})")
    if out["interleave"] and out["interleave"] > 1:
        if out["pp"] == 1:
            raise err("interleave", f"{out['interleave']} needs a pipeline (pp > 1), got pp 1")
        stage = -(-out["spec"].n_layers // out["pp"]) if out["pp"] else None  # layers per pipeline stage
        if stage and stage % out["interleave"]:
            raise err("interleave", f"{out['interleave']} must divide the layers per pipeline stage ({stage}: "
                                    f"{out['spec'].n_layers} layers over pp {out['pp']})")
    if out["activation_offload"]:
        stage = out["spec"].n_layers / (out["pp"] or 1)
        if out["activation_offload"] >= stage:
            raise err("activation_offload", f"{out['activation_offload']} must be below the layers of a pipeline "
                                            f"stage ({stage:g}: {out['spec'].n_layers} layers over pp {out['pp'] or 1})")
        from hwmodels.predict.calibration import host_link_rate
        if host_link_rate(out["hardware"]) is None:
            raise err("activation_offload", f"{out['hardware']} has no published host-link bandwidth to price it "
                                            f"(data/calibration/published.csv, host_copy_GBps); valid here: 0")
    out["activation_offload"] = out["activation_offload"] or 0
    apn = catalog.get(out["hardware"]).accelerators_per_node
    if out["accelerators_per_node"] is not None and out["accelerators_per_node"] > apn:
        raise err("accelerators_per_node", f"{out['accelerators_per_node']} is more than the catalog's "
                                           f"{out['hardware']} node ({apn}); valid: 1 to {apn}")
    if out["cp"] and out["spec"].seq_len % out["cp"]:
        raise err("cp", f"cp {out['cp']} must divide the sequence length ({out['spec'].seq_len})")
    out["tp_comm_overlap"] = out["tp_comm_overlap"] == "true"
    if out["power_limit_w"] is not None:
        from hwmodels.predict.power import compute_factor
        try:  # the range the published curve covers, checked before anything is predicted
            compute_factor(out["hardware"], catalog.get(out["hardware"]).tdp_watts, out["power_limit_w"])
        except ModelInputError as exc:
            raise err("power_limit_w", str(exc).split(": ", 1)[1]) from None
    if out["attention"] is not None:
        kernels = (*_attention_curves(catalog.get(out["hardware"])), MATERIALIZED)
        if out["attention"] not in kernels:
            raise err("attention", f"unknown value {out['attention']!r} for {out['hardware']}; valid choices: "
                                   f"{', '.join(kernels)}")
    return out


def _kernel_points(node_id: str) -> list[Any]:
    """Source (a): this suite's kernel records of ``node_id`` in the default store (none when unreadable)."""
    try:
        from hwcore.records import CellRecord, KernelRecord, current, read
        from hwcore.store import Store
        from hwmodels.predict.calibration import KernelPoint
        store = Store(None)
        # one attempt per plan cell counts (a killed cell's rows are set aside once it was resumed ok)
        recs, _aside = current(read(store, KernelRecord), read(store, CellRecord))
    except (InputError, OSError) as exc:  # an unreadable store: no measured source, the others apply; say so
        warnings.warn(f"predict: store not read ({exc}); measured kernel rates not used", stacklevel=2)
        return []
    from hwmodels.catalog import default_catalog, record_node

    cat, seen = default_catalog(), {}
    pts = []
    for r in recs:
        if not r.ok:
            continue
        key = (r.node_id, r.device, r.params.get("catalog_node"), r.params.get("node"))
        if key not in seen:  # one fingerprint match per (node, device), not one per record
            node = record_node(params=dict(r.params), fingerprint=dict(r.fingerprint or {}), node_id=r.node_id,
                               device=r.device, catalog=cat)
            seen[key] = node.id if node is not None else None
        if seen[key] != node_id:
            continue
        pts.append(KernelPoint(kernel=r.kernel, params=dict(r.params), metrics=dict(r.metrics), origin="measured",
                               where=f"(store run {r.run_id})"))
    return pts


def predict_scenario(sc: dict[str, Any], catalog: Any, where: str = "") -> dict[str, Any]:
    """One scenario -> the JSON object of the CLI (the best layout; runners-up when searched), with the attention
    implementation it was priced with (``attention``: the one stated, else the node's own kernel)."""
    out = _predict_scenario(sc, catalog, where)
    if sc["power_limit_w"] is not None:
        from hwmodels.predict.power import compute_factor
        tdp = catalog.get(sc["hardware"]).tdp_watts
        pf = compute_factor(sc["hardware"], tdp, sc["power_limit_w"])
        out["power_limit"] = {"watts": sc["power_limit_w"], "tdp_watts": tdp, "compute_factor": pf.value,
                              "source": pf.source}
        if pf.value < 1.0:
            out.setdefault("notes", []).insert(0, f"{pf.source.split(', interpolated in ')[0]} "
                                                  f"(+/-{pf.rel_sigma:.0%}; the curve's source in calibration)")
    if sc["attention"] is not None:
        out["attention"] = sc["attention"]
    else:
        out["attention"] = (*_attention_curves(catalog.get(sc["hardware"])), ASSUMED_ATTENTION)[0]
    return out


def _attention_curves(node: Any) -> tuple[str, ...]:
    """The published attention kernel curves ``--attention`` can name on ``node``, the node's own first; () where
    its fused-attention rate is an assumption (no curve to choose). ``materialized`` is always a choice besides."""
    from hwmodels.predict.calibration import calibrate

    cal = calibrate(node)
    return cal.attention_kernels() if cal.attention_eff.kind != "datasheet" else ()


def _predict_scenario(sc: dict[str, Any], catalog: Any, where: str = "") -> dict[str, Any]:
    from hwmodels.errors import ModelInputError
    from hwmodels.predict.calibration import calibrate
    from hwmodels.predict.search import SearchResult, predict_job

    node = catalog.get(sc["hardware"])
    try:
        cal = calibrate(node, _kernel_points(node.id))
        if sc["accelerators_per_node"] is not None:
            cal = cal.with_node_size(sc["accelerators_per_node"], source="stated for this prediction")
        if sc["inter_node_gbps"] is not None:
            cal = cal.with_network(sc["inter_node_gbps"], source="stated for this prediction")
        if sc["power_limit_w"] is not None:
            cal = cal.with_power_limit(sc["power_limit_w"], node.tdp_watts, source="stated for this prediction")
        core = "flash"
        if sc["attention"] == MATERIALIZED:
            core = "materialized"
        elif sc["attention"] is not None:  # one of the node's curves (checked by _scenario)
            cal = cal.with_attention_kernel(sc["attention"])
        res = predict_job(hardware=node, accelerators=sc["accelerators"], model=sc["spec"],
                          micro_batch=sc["micro_batch"], global_batch=sc["global_batch"],
                          precision=sc["precision"] or "bf16", sharding=sc["sharding"], tp=sc["tp"], pp=sc["pp"],
                          activation_checkpointing=sc["activation_checkpointing"],
                          layout=sc["layout"] or "auto", tokens=sc["tokens"], pricing=sc["pricing"],
                          calibration=cal, cp=sc["cp"], tp_comm_overlap=sc["tp_comm_overlap"],
                          interleave=sc["interleave"], offload_layers=sc["activation_offload"],
                          framework=sc["framework"], attention=core)
    except ModelInputError as exc:
        raise InputError(f"{where}{exc}") from None
    if not isinstance(res, SearchResult):
        return res.to_dict()
    if res.best is not None:
        out = res.best.to_dict()
        out["search"] = {"considered": res.considered, "fitting_priced": res.fitting,
                         "runners_up": [_brief(p) for p in res.runners_up]}
        if res.memory_margin is not None:
            safe = res.memory_safe
            out["search"]["memory_safe"] = {
                "margin": res.memory_margin, "is_best": safe is res.best,
                "method": "the fastest layout that fits when its memory is the memory model's held-out q90 error "
                          "above the estimate (data/reference/memory_error.json); null: no layout fits so",
                "layout": None if safe is None else {
                    **_brief(safe), "slower_than_best": res.memory_safe_slowdown,
                    "interval": {k: safe.interval[k] for k in ("level", "tokens_per_s_per_accelerator",
                                                               "step_time_s") if k in safe.interval}}}
        return out
    lay, mem = res.smallest_memory
    least = {"layout": lay.to_dict(), "memory_per_accelerator_GiB": mem.total / 2**30}
    if res.within_error is not None:
        # nothing fits by the point estimate: the fastest layout within the memory model's held-out error of the
        # capacity, marked as not fitting (the rule the validation scores: predictor_error.json unfit_rule)
        out = res.within_error.to_dict()
        out["search"] = {"considered": res.considered, "fitting_priced": 0, "least_memory": least,
                         "note": "no layout fits by the memory model's point estimate; shown: the fastest layout "
                                 "whose estimate is within the model's held-out q90 error of the capacity"}
        return out
    # nothing fits even within that error: the least-memory layout, priced by the search, marked as not fitting
    out = res.least_memory.to_dict()
    out["search"] = {"considered": res.considered, "fitting_priced": 0,
                     "note": "no layout fits in memory; the least-memory layout is shown"}
    return out


def _brief(p: Any) -> dict[str, Any]:
    """A searched alternative in the CLI's JSON: its layout and headline figures."""
    return {"layout": p.layout.to_dict(), "step_time_s": p.step_time_s,
            "tokens_per_s_per_accelerator": p.tokens_per_s_per_accelerator, "mfu": p.mfu,
            "memory_per_accelerator_GiB": p.memory_per_accelerator_GiB}


def _table(rows: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    from hwmodels.predict.layout import layout_label

    t = Table(title="hweval predict (interval: level 0.9, held-out validation error + calibration)")
    for col in ("#", "hardware", "N", "model", "layout", "step s", "tok/s/acc [lo, hi]", "MFU", "mem GiB [lo, hi]", "fits",
                "cost USD [lo, hi]"):
        t.add_column(col)
    for i, r in enumerate(rows, 1):
        lay = r["layout"]
        ls = layout_label(lay)
        lo, hi = r["interval"]["tokens_per_s_per_accelerator"]
        cost = ""
        if r.get("cost_usd") is not None:
            clo, chi = r["interval"]["cost_usd"]
            cost = f"{r['cost_usd']:,.0f} [{clo:,.0f}, {chi:,.0f}]"
        mem = f"{r['memory_per_accelerator_GiB']:.1f}"
        if "memory_per_accelerator_GiB" in r["interval"]:
            mlo, mhi = r["interval"]["memory_per_accelerator_GiB"]
            mem += f" [{mlo:.1f}, {mhi:.1f}]"
        t.add_row(str(i), r["hardware"], str(r["accelerators"]), r["model"], ls, f"{r['step_time_s']:.3g}",
                  f"{r['tokens_per_s_per_accelerator']:,.0f} [{lo:,.0f}, {hi:,.0f}]", f"{r['mfu']:.3f}",
                  mem, "yes" if r["fits"] else "NO", cost)
    import sys

    con = Console(width=None if sys.stdout.isatty() else 200)
    con.print(t)
    for i, r in enumerate(rows, 1):
        ms = (r.get("search") or {}).get("memory_safe")
        if not ms or ms["is_best"]:
            continue
        head = (f"row {i}: {r['memory_per_accelerator_GiB']:.1f} GiB does not fit with the memory model's held-out "
                f"q90 error (+{ms['margin']:.0%}) as headroom; ")
        s = ms["layout"]
        if s is None:
            con.print(head + "no layout of this job does", highlight=False)
        else:
            con.print(head + f"memory-safe alternative {layout_label(s['layout'])}: "
                      f"{s['tokens_per_s_per_accelerator']:,.0f} tok/s/acc ({s['slower_than_best']:.1%} slower), "
                      f"{s['memory_per_accelerator_GiB']:.1f} GiB", highlight=False)
    for line in note_lines(rows):
        con.print(line, highlight=False)


def note_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The predictions' notes (the caveats each figure is read with: regime bias, memory verdict, search optimism)
    under the table: those every row shares once, then each row's own; the memory-safe alternative, printed above,
    is left out."""
    notes = [[n for n in r.get("notes", []) if not n.startswith("memory-safe alternative")] for r in rows]
    common = [n for n in dict.fromkeys(notes[0]) if all(n in ns for ns in notes[1:])] if notes else []
    label = "every row" if len(rows) > 1 else "row 1"
    out = [f"note ({label}): {n}" for n in common]
    for i, ns in enumerate(notes, 1):
        out += [f"note (row {i}): {n}" for n in dict.fromkeys(ns) if n not in common]
    return out


@click.command("predict")
@click.option("--hardware", help="Catalog node id (hweval catalog list).")
@click.option("--accelerators", help="Accelerators in the job.")
@click.option("--model", help="Preset name (gpt3-175b, llama3-8b, ...) or key=value pairs.")
@click.option("--seq-len", help="Sequence length (overrides the preset's).")
@click.option("--micro-batch", help="Sequences per accelerator (per model replica) per forward pass.")
@click.option("--global-batch", help="Sequences per optimizer step (default: ~4M tokens).")
@click.option("--precision", help="bf16 (default) | fp8 | fp16 | fp32 | fp4 (NVFP4 block scaling; where the catalog has an fp4 peak).")
@click.option("--sharding", help="none | ddp | zero1 | shard_grad_op | full_shard.")
@click.option("--tp", help="Tensor-parallel degree.")
@click.option("--pp", help="Pipeline-parallel degree.")
@click.option("--interleave", help="Virtual pipeline chunks per rank (interleaved 1F1B; needs pp > 1; searched "
                                   "among 1, 2, 4 when absent).")
@click.option("--activation-offload", help="Layers per pipeline stage whose saved activations go to host memory "
                                          "(Megatron cpu_offloading_num_layers; default 0; priced at the node's "
                                          "published host-link rate).")
@click.option("--cp", help="Context-parallel degree (each sequence split over cp ranks; searched when absent).")
@click.option("--tp-comm-overlap", help="true | false (default): TP collectives pipelined with the GEMMs.")
@click.option("--layout", help="auto (default: search what is not given) | fixed.")
@click.option("--activation-checkpointing", help="none | selective | full.")
@click.option("--tokens", help="Training tokens: adds time to train, accelerator-hours (and cost with --pricing).")
@click.option("--pricing", help="Catalog price mode: on_demand | reserved | reserved_3y | spot | on_prem.")
@click.option("--framework", help="Framework family the job will run (default unknown): its fitted factors and its "
                                  "narrower validated band; valid: the families the validation fitted "
                                  "(megatron, maxtext, llm-foundry, torchtitan, neuron, ...).")
@click.option("--accelerators-per-node", help="Accelerators per node of the cluster, where it is a smaller board of "
                                             "the type than the catalog's (e.g. 4 for a 4-GPU HGX of an 8-GPU type).")
@click.option("--inter-node-gbps", help="Scale-out network of the cluster, Gb/s per node one direction (default: the "
                                       "catalog node's).")
@click.option("--power-limit-w", help="Power limit per accelerator in watts, where it is held below the catalog's "
                                     "TDP (a facility cap, nvidia-smi -pl): compute rates at the published "
                                     "sustained-clock ratio at that fraction of TDP (data/calibration/"
                                     "power_limit.csv).")
@click.option("--attention", help="Attention implementation the framework runs: one of the node's published kernel "
                                  "curves (flash_attn_2, flash_attn_1, flash_attn_triton, cudnn, ...; default the "
                                  "node's own) or materialized (score GEMMs and a softmax, no fused kernel).")
@click.option("--batch", "batch", type=click.Path(dir_okay=False), help="CSV of scenarios, one per row.")
@click.option("--json", "as_json", is_flag=True, help="JSON (JSON Lines with --batch) instead of a table.")
def predict(batch: str | None, as_json: bool, **opts: Any) -> None:
    """Predict step time, throughput, MFU, memory and cost of a training job (hwmodels.predict)."""
    from hwmodels.catalog import default_catalog
    from hwmodels.errors import ModelInputError

    try:
        catalog = default_catalog()
    except ModelInputError as exc:
        raise InputError(str(exc)) from None
    scenarios: list[tuple[str, dict[str, Any]]] = []
    if batch:
        given = [k for k, v in opts.items() if v is not None]
        if given:
            raise InputError(f"--batch: cannot be combined with --{given[0].replace('_', '-')} "
                             "(put it in a CSV column)")
        p = Path(batch)
        if not p.is_file():
            raise InputError(f"--batch: no such file {batch!r}")
        try:
            with p.open(newline="") as f:
                reader = csv.DictReader(f)
                header = [h.strip() for h in (reader.fieldnames or [])]
                unknown = [h for h in header if h not in COLUMNS]
                if unknown:
                    raise InputError(f"--batch {batch}: column {unknown[0]!r}: unknown column; valid columns: "
                                     + ", ".join(COLUMNS))
                for i, row in enumerate(reader, 1):
                    clean = {(k or "").strip(): v for k, v in row.items() if k is not None}
                    if None in row:
                        raise InputError(f"--batch {batch}: row {i}: more cells than columns")
                    scenarios.append((f"--batch {batch}: row {i}, column ", clean))
        except UnicodeDecodeError:
            raise InputError(f"--batch {batch}: not a UTF-8 text CSV") from None
        if not scenarios:
            raise InputError(f"--batch {batch}: no rows")
    else:
        scenarios.append(("--", {k: v for k, v in opts.items()}))
    typed = []
    for where, raw in scenarios:
        sc = _scenario(raw, where if where != "--" else "--", catalog)
        typed.append((where, sc))
    results = []
    for where, sc in typed:
        w = where.replace(", column ", ": ") if where != "--" else ""
        results.append(predict_scenario(sc, catalog, w))
    if as_json:
        from hweval.commands.common import echo_json
        for r in results:
            echo_json(r)
    else:
        _table(results)
