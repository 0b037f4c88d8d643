"""``hweval import``: bring measurements people already have into the results store.

``hweval import nccl-tests LOG... [--store DIR] [--node ID] [--collective C] [--ranks N] [--json]``
    raw nccl-tests stdout of any collective; one ``kernel`` record per row
    (name = the collective), with the log's rank count and device names; the
    catalog node is ``--node`` or the one whose GPU names match the log's.

``hweval import mlperf PATH... [--store DIR] [--json]``
    MLPerf Training result logs (``:::MLLOG``) and system description JSON
    (files or directories); one ``mlperf`` record per run and one olympic-mean
    record per (system, benchmark).

Every file is parsed before anything is written; the records then go to the
store as one Parquet part (atomic), so a malformed line anywhere leaves the
store untouched: one line ``FILE:LINE: what is wrong`` and exit code 2.
Provenance (source path, sha256, importer and version) is in every record's
``params``.
"""

from __future__ import annotations

import click

from hweval.commands.common import echo_json, open_store, store_option
from hwcore.errors import InputError


def _check_node(node_id: str | None) -> None:
    if node_id is None:
        return
    from hwmodels.catalog import default_catalog
    from hwmodels.errors import ModelInputError

    try:
        default_catalog().get(node_id)
    except ModelInputError as exc:
        raise InputError(f"--node: {exc}") from None


@click.group("import")
def import_() -> None:
    """Import nccl-tests logs or MLPerf Training results into the store."""


@import_.command("nccl-tests")
@click.argument("logs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--node", "node_id", default=None, help="Catalog node id of the system (default: matched from the "
              "log's GPU names).")
@click.option("--collective", default=None, help="Collective, when neither the log nor the file name says "
              "(all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv).")
@click.option("--ranks", type=click.IntRange(min=1), default=None,
              help="Rank count, when the log has no '# Rank N ...' lines.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@store_option
def nccl_tests_cmd(logs, node_id, collective, ranks, as_json, store_path) -> None:
    """Import raw nccl-tests stdout (any *_perf binary)."""
    from hweval.importers import nccl_tests as NT
    from hwcore.store import new_run_id

    _check_node(node_id)
    store = open_store(store_path, write=True)
    parsed = []
    for path in logs:
        for log in NT.parse_file(path, collective=collective, ranks=ranks):
            if log.ranks is None:
                raise InputError(f"{path}: no '# Rank N ...' lines, so the rank count is unknown; pass --ranks")
            parsed.append(log)
    run_id = new_run_id()
    records, summary = [], []
    for log in parsed:
        nid = node_id or NT.match_node_id(log)
        records.extend(NT.to_records(log, node_id=nid, run_id=run_id))
        summary.append({"file": log.source.path, "sha256": log.source.sha256, "collective": log.collective,
                        "ranks": log.ranks, "nodes": log.nodes, "rows": len(log.rows), "node_id": nid,
                        "devices": list(log.device_names)})
    part = store.append(records)
    out = {"imported": len(records), "run_id": run_id, "store": str(store.path), "part": str(part) if part else None,
           "files": summary}
    if as_json:
        echo_json(out)
        return
    for s in summary:
        click.echo(f"{s['file']}: {s['rows']} rows of {s['collective']} on {s['ranks']} ranks"
                   f"{' / ' + str(s['nodes']) + ' nodes' if s['nodes'] else ''}, node {s['node_id'] or '(no catalog match)'}")
    click.echo(f"imported {len(records)} records into {store.path} (run {run_id})")


@import_.command("mlperf")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--node", "node_id", default=None, help="Catalog node id of the system (default: matched from the "
              "system description's accelerator_model_name).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@store_option
def mlperf_cmd(paths, node_id, as_json, store_path) -> None:
    """Import MLPerf Training result logs and system description JSON."""
    from hweval.importers import mlperf as ML
    from hwcore.store import new_run_id

    _check_node(node_id)
    store = open_store(store_path, write=True)
    runs, systems = ML.parse_all(list(paths))
    run_id = new_run_id()
    records, warnings = ML.to_records(runs, systems, run_id=run_id, node_id=node_id)
    for w in warnings:
        click.echo(f"hweval: warning: {w}", err=True)
    part = store.append(records)
    results = []
    for r in records:
        p = r.params
        if p.get("aggregate") == "olympic_mean":
            results.append({"benchmark": r.name, "system": p.get("system"), "accelerators": p.get("accelerators"),
                            **r.metrics.get("olympic", {})})
    out = {"imported": len(records), "runs": len(runs), "systems": sorted({s.name for s in systems.values()}),
           "run_id": run_id, "store": str(store.path), "part": str(part) if part else None, "results": results,
           "warnings": warnings}
    if as_json:
        echo_json(out)
        return
    for res in results:
        if res.get("valid"):
            click.echo(f"{res['benchmark']} on {res['system'] or '?'} ({res['accelerators'] or '?'} accelerators): "
                       f"{res['time_to_train_s'] / 60:.2f} min olympic mean of {res['kept']} of {res['runs']} runs")
        else:
            click.echo(f"{res['benchmark']} on {res['system'] or '?'}: no benchmark result ({res.get('reason')})")
    click.echo(f"imported {len(records)} records ({len(runs)} runs) into {store.path} (run {run_id})")
