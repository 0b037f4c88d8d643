"""Collectives: a real 2-process gloo run on loopback, launched by the kernel itself."""

from __future__ import annotations

import warnings

import pytest

from hwcore.store import Store
from kernels import registry as R
from kernels.collectives import bus_factor, message_sizes


def test_message_sizes_cover_1kib_to_256mib():
    s = message_sizes()
    assert s[0] == 1024 and s[-1] == 256 * 2**20 and all(b == 2 * a for a, b in zip(s, s[1:], strict=False))


@pytest.mark.slow
def test_two_process_gloo_all_reduce_and_all_gather(store_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rs = R.sweep("all_reduce", [{"size_bytes": "1KiB"}, {"size_bytes": "64KiB"}, {"size_bytes": "64G"}],
                     warmup_ms=1, measure_ms=20)
    assert [r.status for r in rs] == ["ok", "ok", "oom"]
    for r in rs[:2]:
        assert r.kind == "collective" and r.extra["backend"] == "gloo" and r.n >= 5
        assert r.extra["algbw_Bps"] == pytest.approx(r.params["size_bytes"] / r.median_s)
        assert r.extra["busbw_Bps"] == pytest.approx(r.extra["algbw_Bps"] * bus_factor("all_reduce", 2))
        assert r.bytes_per_s == pytest.approx(r.extra["busbw_Bps"])
    df = Store(store_path).records()
    assert sorted(df["status"]) == ["ok", "ok", "oom"] and set(df["kind"]) == {"collective"}


def test_bad_world_size_is_input_error():
    from hwcore.errors import InputError

    with pytest.raises(InputError, match=r"all_gather\.world_size: expected an integer in \[1, 64\]"):
        R.validate_params("all_gather", {"world_size": "100"})


@pytest.mark.slow
@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "broadcast"])
def test_other_collectives_pass_their_rank_checks(op):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = R.run(op, {"size_bytes": "8KiB"}, record=False, warmup_ms=1, measure_ms=10)
    assert r.ok, r.error
    assert r.extra["busbw_Bps"] == pytest.approx(r.extra["algbw_Bps"] * bus_factor(op, 2))
