"""Activation offload to host memory (Megatron-Core / Transformer Engine ``cpu_offloading_num_layers``): memory,
step time and the host-link rate it is priced at."""

from __future__ import annotations

import dataclasses

import pytest

from hwmodels.errors import ModelInputError
from hwmodels.predict import Layout, calibrate, preset, search, step_times
from hwmodels.predict.calibration import Rate, host_link_rate
from hwmodels.predict.memory import estimate, saved_bytes_per_layer, saved_precision


@pytest.fixture(scope="module")
def gb300(cat):
    return calibrate(cat.get("gb300-nvl72"))


def _layout(**kw) -> Layout:
    base = dict(dp=64, tp=1, pp=1, micro_batch=2, sharding="full_shard", recompute="none", precision="fp8")
    return Layout(**{**base, **kw})


def test_offloaded_layers_leave_the_device_but_one_in_flight(gb300):
    s = preset("llama3-70b")
    kw = dict(capacity_bytes=gb300.memory_capacity_bytes, precision="fp8", sharding="full_shard", dp=64, tp=1, pp=1,
              micro_batch=2, seq_len=8192, sp=False, recompute="none")
    base, off = estimate(s, **kw), estimate(s, offload_layers=20, **kw)
    per_layer = saved_bytes_per_layer(s, micro_batch=2, seq_len=8192, tp=1, sp=False, recompute="none",
                                      precision="fp8")
    assert base.activations - off.activations == pytest.approx((20 - 1) * per_layer)
    assert off.weights == base.weights and off.optimizer == base.optimizer
    with pytest.raises(ModelInputError, match="offload_layers: 80 must be below the layers of a pipeline stage"):
        estimate(s, offload_layers=80, **kw)


def test_offload_layers_must_be_a_whole_number():
    for bad in (-1, 1.5, True):
        with pytest.raises(ModelInputError, match="layout.offload_layers"):
            _layout(offload_layers=bad)
    assert "off20" in _layout(offload_layers=20).label()
    assert "off" not in _layout().label()


def test_offload_costs_the_host_copies_compute_does_not_hide(gb300):
    """At the published host link the copies of a 70B layer mostly hide under the phase they run in; on a link a
    hundred times slower they set the pace: each direction exposes ``t - overlap x phase``."""
    s = preset("llama3-70b")
    kw = dict(global_batch=256)
    none = step_times(s, gb300, _layout(), **kw)
    off = step_times(s, gb300, _layout(offload_layers=20), **kw)
    assert off.compute == pytest.approx(none.compute)
    assert off.exposed_comm > none.exposed_comm  # the 5% floor at least
    assert off.memory.activations < none.memory.activations
    slow_bw = gb300.host_link.value / 100
    slow = dataclasses.replace(gb300, host_link=Rate(value=slow_bw, kind="published", source="test"))
    st = step_times(s, slow, _layout(offload_layers=20), **kw)
    t = 20 * saved_bytes_per_layer(s, micro_batch=2, seq_len=8192, tp=1, sp=False, recompute="none",
                                   precision="fp8") / slow_bw
    m = st.microbatches
    assert st.exposed_comm - none.exposed_comm > 0.9 * m * 2 * t  # the phases hide under a tenth of it
    assert st.exposed_comm - none.exposed_comm < m * 2 * t
    assert st.comm_total - none.comm_total == pytest.approx(m * 2 * t)
    # torchao float8 keeps 16-bit saved inputs: the copies carry those bytes, as the memory estimate counts them
    # (memory.saved_precision, the rule's one home)
    hp = step_times(s, slow, _layout(offload_layers=20, quantized_saves=False), **kw)
    t16 = 20 * saved_bytes_per_layer(s, micro_batch=2, seq_len=8192, tp=1, sp=False, recompute="none",
                                     precision=saved_precision("fp8", False)) / slow_bw
    assert saved_precision("fp8") == "fp8" and saved_precision("fp8", False) == "bf16" and t16 > t
    assert hp.comm_total - none.comm_total == pytest.approx(m * 2 * t16)


def test_offload_needs_a_host_link_figure(cat):
    h100 = calibrate(cat.get("h100-sxm"))
    assert h100.host_link is None
    with pytest.raises(ModelInputError, match="offload_layers: h100-sxm has no host-link bandwidth"):
        step_times(preset("llama3-8b"), h100, _layout(dp=8, offload_layers=4), global_batch=64)


def test_host_link_is_the_slower_direction_of_all_accelerators_copying_at_once(gb300, cat, tmp_path):
    assert gb300.host_link.value == pytest.approx(168.60e9)
    assert host_link_rate("gb300-nvl72") == gb300.host_link and host_link_rate("h100-sxm") is None
    assert "host_to_all" in gb300.host_link.source and gb300.sources()["host_link"].startswith("published")
    gb200 = calibrate(cat.get("gb200-nvl72"))
    assert gb200.host_link.rel_sigma > gb300.host_link.rel_sigma and "carried" in gb200.host_link.source
    # rows of one accelerator at a time are not used: alone, a GPU gets more of a host link it shares
    head = "node_id,quantity,value,unit,condition,framework,source,source_detail,as_of\n"
    one = "gb300-nvl72,host_copy_GBps,{v},GB/s,direction={d};concurrent={c},t,s,d,2026-01-01\n"

    def link(name, *rows):
        path = tmp_path / name  # one file per case: published rows are read once per path
        path.write_text(head + "".join(one.format(v=v, d=d, c=c) for v, d, c in rows))
        return calibrate(cat.get("gb300-nvl72"), published_csv=path).host_link

    assert link("one.csv", (200, "d2h", "one"), (210, "h2d", "one")) is None
    assert link("half.csv", (200, "d2h", "all"), (150, "h2d", "one")) is None  # one direction only
    assert link("all.csv", (200, "d2h", "all"), (180, "h2d", "all")).value == pytest.approx(180e9)


def test_the_search_tries_offload_beside_recomputation_where_a_host_link_is_known(gb300, cat):
    """70B FP8 on 64 GB300 with Megatron-FSDP at micro-batch 2 (NVIDIA's Megatron-Bridge recipe): nothing fits
    without recomputation or offload; the search's fastest offloads part of the layers instead of recomputing
    (the recipe offloads 20), and says so in a note. Without the option, or with recompute stated, or on a node
    without a host-link figure, it recomputes as before."""
    from hwmodels.predict.search import _offload_ladder

    assert _offload_ladder(80) == [10, 20, 30, 40, 50, 60] and _offload_ladder(2) == [1]
    s = preset("llama3-70b")
    job = dict(hardware="gb300-nvl72", accelerators=64, global_batch=256, precision="fp8", tp=1, pp=1, cp=1,
               sharding="full_shard", micro_batch=2)
    res = search(s, gb300, **job)
    best = res.best.layout
    assert best.offload_layers > 0 and best.recompute == "none" and res.best.memory.fits
    assert any(n.startswith("activation offload:") for n in res.best.notes)
    plain = search(s, gb300, search_offload=False, **job).best
    assert plain.layout.offload_layers == 0 and plain.layout.recompute == "full"
    assert res.best.tokens_per_s > plain.tokens_per_s
    stated = search(s, gb300, recompute="full", **job).best
    assert stated.layout.offload_layers == 0
    h100 = calibrate(cat.get("h100-sxm"))
    for p in (search(s, h100, **{**job, "hardware": "h100-sxm", "precision": "fp8", "tp": 8}).best,):
        assert p is None or p.layout.offload_layers == 0
