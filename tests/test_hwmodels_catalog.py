"""Catalog: loading, SI conversion, sources, dense-vs-sparse validation, prices, matching."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import pytest

from hwmodels.catalog import (HOURS_PER_YEAR, default_catalog, load_catalog, match_node,
                              parse_node)
from hwmodels.errors import ModelInputError

REPO = Path(__file__).resolve().parent.parent
CAT_DIR = REPO / "data" / "catalog"
REQUIRED_IDS = {"cpu-epyc-zen4-2c", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x", "tpu-v5p", "gaudi3"}


def _raw(node_id: str) -> dict:
    return tomllib.loads((CAT_DIR / f"{node_id}.toml").read_text())


def test_ships_required_entries_with_sources():
    cat = load_catalog()
    assert REQUIRED_IDS <= set(cat.ids())
    for node in cat:
        assert node.sources, node.id
        for key, src in node.sources.items():
            assert isinstance(src, str) and len(src) >= 8, (node.id, key)
        for mode, price in node.pricing.items():
            assert price.source, (node.id, mode)
            if price.available and mode != "on_prem":
                assert price.provider and price.date and price.usd_per_hour > 0, (node.id, mode)
        assert node.modes, f"{node.id}: no usable pricing mode"


def test_si_conversion_on_load():
    h100 = default_catalog().get("h100-sxm")
    assert h100.peak_flops_per_s("bf16", per="accelerator") == pytest.approx(989.4e12)
    assert h100.peak_flops_per_s("bf16") == pytest.approx(8 * 989.4e12)  # per node by default
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.memory_capacity_bytes == pytest.approx(80e9)
    assert h100.inter_node_bytes_per_s == pytest.approx(3200e9 / 8)
    cpu = default_catalog().get("cpu-epyc-zen4-2c")
    assert cpu.memory_capacity_bytes == 8 * 2**30
    assert cpu.peak_flops_per_s("fp32") == pytest.approx(236.8e9)


def test_dense_is_never_the_sparse_figure():
    for node in default_catalog():
        for dtype, p in node.peaks.items():
            dense = node.peak_flops_per_s(dtype, per="accelerator")
            assert dense == p.dense_flops_per_s
            if p.sparse_flops_per_s is not None:
                assert node.peak_flops_per_s(dtype, sparse=True, per="accelerator") == pytest.approx(2 * dense, rel=0.02)
            else:
                with pytest.raises(ModelInputError, match="no with-sparsity figure"):
                    node.peak_flops_per_s(dtype, sparse=True)


def test_sparse_pasted_as_dense_is_rejected_by_the_ratio_check():
    d = _raw("h100-sxm")
    d["peak"]["fp8"]["dense_tflops"] = 3957.8  # the datasheet's with-sparsity FP8 number under "dense"
    with pytest.raises(ModelInputError, match=r"peak\.fp8\.sparse_tflops.*2x the dense"):
        parse_node(d, "h100-sxm.toml")


def test_sparse_as_dense_is_rejected_by_the_derivation_even_without_a_sparse_field():
    d = _raw("h100-sxm")
    d["peak"]["bf16"]["dense_tflops"] = 1978.9  # "1,979 TFLOPS*" copied as dense
    del d["peak"]["bf16"]["sparse_tflops"]
    with pytest.raises(ModelInputError, match=r"peak\.bf16\.dense_tflops.*with-sparsity figure used as dense"):
        parse_node(d, "h100-sxm.toml")
    # the real figure passes
    parse_node(_raw("h100-sxm"), "h100-sxm.toml")


def test_missing_source_is_rejected():
    d = _raw("a100-80gb-sxm")
    del d["peak"]["bf16"]["source"]
    with pytest.raises(ModelInputError, match=r"peak\.bf16\.source: missing"):
        parse_node(d, "a100.toml")
    d = _raw("a100-80gb-sxm")
    d["pricing"]["on_prem"]["capex"]["source"] = ""
    with pytest.raises(ModelInputError, match=r"pricing\.on_prem\.capex\.source"):
        parse_node(d, "a100.toml")


def test_unknown_and_missing_keys_name_the_dotted_field():
    d = _raw("mi300x")
    d["memory"]["bandwith_TBps"] = 5.3  # typo
    with pytest.raises(ModelInputError, match=r"memory\.bandwith_TBps: unknown key"):
        parse_node(d, "mi300x.toml")
    d = _raw("mi300x")
    del d["memory"]["bandwidth_TBps"]
    with pytest.raises(ModelInputError, match=r"memory\.bandwidth_TBps: missing"):
        parse_node(d, "mi300x.toml")
    d = _raw("mi300x")
    del d["pricing"]["spot"]
    with pytest.raises(ModelInputError, match=r"pricing\.spot: missing pricing mode"):
        parse_node(d, "mi300x.toml")
    d = _raw("mi300x")
    d["peak"]["fp12"] = {"dense_tflops": 1.0, "source": "made up for a test"}
    with pytest.raises(ModelInputError, match=r"peak\.fp12: unknown dtype"):
        parse_node(d, "mi300x.toml")


def test_unknown_node_lists_valid_ids():
    with pytest.raises(ModelInputError) as e:
        default_catalog().get("h300")
    for nid in REQUIRED_IDS:
        assert nid in str(e.value)


def test_on_prem_hourly_formula():
    a100 = default_catalog().get("a100-80gb-sxm")
    p = a100.price("on_prem")
    expected = p.capex_usd / (p.amortization_years * HOURS_PER_YEAR * p.utilization) \
        + a100.node_watts / 1000 * p.pue * p.usd_per_kwh
    assert a100.price_per_hour("on_prem") == pytest.approx(expected)
    assert HOURS_PER_YEAR == pytest.approx(8766)
    # overrides for sensitivity; halving utilization doubles the capex term
    cap_term = p.capex_usd / (p.amortization_years * HOURS_PER_YEAR * p.utilization)
    assert a100.price_per_hour("on_prem", utilization=p.utilization / 2) == pytest.approx(expected + cap_term)
    with pytest.raises(ModelInputError, match="override"):
        a100.price_per_hour("on_prem", discount=0.5)


def test_unavailable_mode_says_why_and_lists_available():
    tpu = default_catalog().get("tpu-v5p")
    with pytest.raises(ModelInputError, match=r"on_prem: not available \(Google does not sell.*available modes: on_demand, reserved"):
        tpu.price_per_hour("on_prem")
    with pytest.raises(ModelInputError, match="valid choices"):
        tpu.price_per_hour("lease")


def test_match_node():
    cat = default_catalog()
    this = {"cpu_model": "AMD EPYC", "cpu_flags": {"avx512f": True, "avx512_bf16": True}, "cores_usable": 2, "gpus": []}
    assert match_node(this, cat).id == "cpu-epyc-zen4-2c"
    assert match_node({**this, "cores_usable": 64}, cat) is None
    assert match_node({**this, "cpu_flags": {"avx512f": True, "avx512_bf16": False}}, cat) is None
    gpu = {"cpu_model": "Intel Xeon", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    assert match_node(gpu, cat).id == "h100-sxm"
    assert match_node({"gpus": [{"name": "NVIDIA A100-SXM4-80GB"}]}, cat).id == "a100-80gb-sxm"
    assert match_node({"gpus": [{"name": "Tesla T4"}]}, cat) is None


def test_this_machine_matches_the_cpu_entry():
    from hwcore.fingerprint import fingerprint

    fp = fingerprint()
    node = match_node(fp)
    if "EPYC" in str(fp.get("cpu_model")) and (fp.get("cpu_flags") or {}).get("avx512_bf16") and fp.get("cores_usable", 99) <= 2:
        assert node is not None and node.id == "cpu-epyc-zen4-2c"


def test_bad_catalog_paths(tmp_path):
    with pytest.raises(ModelInputError, match="no such file"):
        load_catalog(tmp_path / "nope.toml")
    with pytest.raises(ModelInputError, match="no \\*.toml"):
        load_catalog(tmp_path)
    (tmp_path / "x.toml").write_text("id = [")
    with pytest.raises(ModelInputError, match="not valid TOML"):
        load_catalog(tmp_path)
