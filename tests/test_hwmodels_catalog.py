"""Catalog: loading, SI conversion, sources, dense-vs-sparse validation, prices, matching."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from hwmodels.catalog import (HOURS_PER_YEAR, default_catalog, load_catalog, match_node,
                              parse_node)
from hwmodels.errors import ModelInputError

REPO = Path(__file__).resolve().parent.parent
CAT_DIR = REPO / "data" / "catalog"
REQUIRED_IDS = {"cpu-epyc-zen4-2c", "a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x",
                "tpu-v5e", "tpu-v5p", "gaudi2", "gaudi3", "l40s"}


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
        # a usable price, or (a type with no public price yet, e.g. tpu7x) every mode marked unavailable with why
        assert node.modes or (node.pricing and all(not p.available and len(p.source) >= 8
                                                   for p in node.pricing.values())), f"{node.id}: no pricing mode"


def test_a_type_without_a_price_is_predicted_and_listed_as_not_priced():
    """TPU7x has no public list price: the procurement options price no row of it and say why, per mode, while
    the predictor still gives its time (hweval predict works without a price)."""
    from hweval.analysis import job_options, job_tokens
    from hweval.job import parse_job

    cat = load_catalog()
    assert not cat.get("tpu7x").modes
    job = parse_job({"model": "llama2-7b", "tokens": 1e11, "global_batch": 1024, "accelerators": [64],
                     "pricing": ["on_demand", "spot"]})
    opts, missing = job_options(job, job_tokens(job), cat, candidates=["tpu7x"])
    assert not opts
    per_mode = [m for m in missing if m.pricing]
    assert {m.pricing for m in per_mode} == {"on_demand", "spot"}
    assert all("price not available" in m.reason for m in per_mode)
    # ... and its predicted time at each count asked for, with the interval, in place of a cost
    (timed,) = [m for m in missing if m.pricing is None]
    assert timed.accelerators == 64 and timed.reason.startswith("not priced") and "predicted time" in timed.reason
    assert "90%:" in timed.reason and "accelerator-hours" in timed.reason


def test_si_conversion_on_load():
    h100 = default_catalog().get("h100-sxm")
    assert h100.peak_flops_per_s("bf16", per="accelerator") == pytest.approx(989.4e12)
    assert h100.peak_flops_per_s("bf16") == pytest.approx(8 * 989.4e12)  # per node by default
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.memory_capacity_bytes == pytest.approx(81559 * 2**20)  # as nvidia-smi reports it (79.65 GiB)
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


# ------------------------------------------------------------------ topology
@pytest.mark.parametrize("nid, scale_up, topology, unidir_GBps, inter_GBps_per_acc", [
    ("a100-40gb-sxm", 8, "switch", 300, 6.25),      # NVLink 600 GB/s bidirectional; p4d 400 Gbps / 8
    ("a100-80gb-sxm", 8, "switch", 300, 6.25),
    ("h100-sxm", 8, "switch", 450, 50),             # 900 GB/s bidirectional; p5 3200 Gbps / 8
    ("h200-sxm", 8, "switch", 450, 50),
    ("b200", 8, "switch", 900, 50),                 # NVLink5 1.8 TB/s bidirectional
    ("mi300x", 8, "mesh", 448, 50),                 # 7 x 128 GB/s bidirectional Infinity Fabric
    ("gaudi2", 8, "mesh", 262.5, 37.5),             # 21 x 100 GbE per direction; 3 x 100 GbE x 8 out
    ("gaudi3", 8, "mesh", 525, 75),                 # 21 x 200 GbE; 3 x 200 GbE x 8 out
    ("tpu-v5e", 256, "torus2d", 200, 3.125),        # ICI 400 GB/s bidirectional; 2 x 100 Gbps NIC / 8 chips
    ("tpu-v5p", 6144, "torus3d", 600, 6.25),        # ICI 1200 GB/s bidirectional; DCN 50 Gbps per chip
    ("l40s", 8, "pcie", 32, 6.25),                  # PCIe Gen4 x16 64 GB/s bidirectional; g6e 400 Gbps / 8
    ("cpu-epyc-zen4-2c", 1, "none", 40, 12.5 / 8),
])
def test_topology_attributes(nid, scale_up, topology, unidir_GBps, inter_GBps_per_acc):
    n = default_catalog().get(nid)
    assert n.topology_declared
    assert n.scale_up_size == scale_up and isinstance(n.scale_up_size, int)
    assert n.intra_node_topology == topology
    assert n.intra_node_link
    assert n.intra_node_unidir_bytes_per_s == pytest.approx(unidir_GBps * 1e9)
    assert n.inter_node_bytes_per_s_per_accelerator == pytest.approx(inter_GBps_per_acc * 1e9)
    # the old per-node / as-stated fields keep their meaning
    assert n.inter_node_bytes_per_s == pytest.approx(n.inter_node_bytes_per_s_per_accelerator * n.accelerators_per_node)
    assert n.intra_node_bytes_per_s == pytest.approx(
        n.intra_node_unidir_bytes_per_s * (2 if n.intra_node_bidirectional else 1))


def test_h100_nvlink_is_halved_because_the_datasheet_figure_is_bidirectional():
    h = default_catalog().get("h100-sxm")
    assert h.intra_node_bidirectional and h.intra_node_bytes_per_s == pytest.approx(900e9)
    assert h.intra_node_unidir_bytes_per_s == pytest.approx(450e9)
    d = _raw("h100-sxm")
    d["links"]["intra_node_direction"] = "unidirectional"
    assert parse_node(d, "h100-sxm.toml").intra_node_unidir_bytes_per_s == pytest.approx(900e9)


@pytest.mark.parametrize("key, value, match", [
    ("intra_node_topology", "hypercube", r"links\.intra_node_topology: unknown value 'hypercube'; valid choices: switch, mesh"),
    ("intra_node_direction", "both", r"links\.intra_node_direction: unknown value 'both'; valid choices: bidirectional"),
    ("scale_up_size", 4, r"links\.scale_up_size: 4 is smaller than accelerators\.per_node_count = 8"),
    ("scale_up_size", 8.5, r"links\.scale_up_size: must be a whole number"),
    ("intra_node_link", "", r"links\.intra_node_link: expected a non-empty string"),
])
def test_bad_topology_names_the_dotted_field(key, value, match):
    d = _raw("h100-sxm")
    d["links"][key] = value
    with pytest.raises(ModelInputError, match=match):
        parse_node(d, "h100-sxm.toml", require_topology=True)


def test_catalog_files_must_declare_topology(tmp_path):
    d = _raw("h100-sxm")
    del d["links"]["scale_up_size"]
    with pytest.raises(ModelInputError, match=r"links\.scale_up_size: missing required key"):
        parse_node(d, "h100-sxm.toml", require_topology=True)
    # a hand-built mapping without any topology key still parses (one level, flagged undeclared)
    for k in ("scale_up_size", "intra_node_link", "intra_node_topology", "intra_node_direction"):
        d["links"].pop(k, None)
    n = parse_node(d, "h100-sxm.toml")
    assert not n.topology_declared and n.scale_up_size == 8


# ------------------------------------------------------------------ dated prices
def test_every_price_is_dated_with_provider_instance_region():
    from hwmodels.catalog import parse_as_of

    for node in default_catalog():
        for mode, p in node.pricing.items():
            if not p.available:
                assert len(p.source) >= 8, (node.id, mode)  # the reason it is unavailable
                continue
            parse_as_of(p.as_of)
            if mode != "on_prem":
                assert p.provider and p.instance and p.region and p.usd_per_hour > 0, (node.id, mode)
            if mode in ("reserved", "reserved_3y"):
                assert p.term, (node.id, mode)


def test_h100_on_demand_is_the_post_june_2025_aws_rate_and_ranks_below_h200():
    cat = default_catalog()
    h100, h200 = cat.get("h100-sxm"), cat.get("h200-sxm")
    p = h100.price("on_demand")
    assert p.provider == "AWS" and p.usd_per_hour < 98.32 * 0.6  # the 2024 rate was USD 98.32/h
    assert p.as_of_date >= parse_date("2025-06")
    assert h100.price_per_accelerator_hour("on_demand") < h200.price_per_accelerator_hour("on_demand")


def parse_date(s):
    from hwmodels.catalog import parse_as_of
    return parse_as_of(s)


@pytest.mark.parametrize("as_of, today, months, stale", [
    ("2025-12", "2026-12-01", 12.0, False),
    ("2025-11", "2026-12-03", 13.1, True),
    ("2024-06", "2026-12-03", 30.1, True),
    ("2026-11-20", "2026-12-03", 0.4, False),
])
def test_price_age_and_staleness(as_of, today, months, stale):
    from hwmodels.catalog import Price

    p = Price("on_demand", True, "a quote for this test", usd_per_hour=1.0, as_of=as_of)
    assert p.age_months(today) == pytest.approx(months, abs=0.1)
    assert p.stale(today) is stale
    assert Price("spot", False, "not offered here").stale(today) is False  # unavailable is not stale


def test_catalog_prices_are_stale_on_2026_12_03():
    import datetime as dt

    today = dt.date(2026, 12, 3)
    h100 = default_catalog().get("h100-sxm")
    assert "on_demand" in h100.stale_prices(today)  # 2025-08 listing, 16 months old
    fresh = h100.stale_prices(dt.date(2025, 9, 1))
    assert "on_demand" not in fresh and "on_prem" in fresh  # capex estimate dates from 2024-06


@pytest.mark.parametrize("value, match", [
    ("2025-13", r"pricing\.on_demand\.as_of: .*not a calendar date"),
    ("June 2025", r"pricing\.on_demand\.as_of: expected a date YYYY-MM or YYYY-MM-DD, got 'June 2025'"),
    ("2025-02-30", r"not a calendar date"),
    ("1999-01", r"before 2000"),
    (202506, r"expected a date YYYY-MM"),
])
def test_bad_as_of_names_the_dotted_field(value, match):
    d = _raw("h100-sxm")
    d["pricing"]["on_demand"]["as_of"] = value
    with pytest.raises(ModelInputError, match=match):
        parse_node(d, "h100-sxm.toml")


def test_old_free_form_date_key_is_refused_with_the_new_name():
    d = _raw("h100-sxm")
    d["pricing"]["on_demand"]["date"] = d["pricing"]["on_demand"].pop("as_of")
    with pytest.raises(ModelInputError, match=r"pricing\.on_demand\.date: renamed: write the listing date as as_of"):
        parse_node(d, "h100-sxm.toml")


# ------------------------------------------------------------------ buyer quotes (hwmodels.prices)
QUOTES = ("node,mode,usd_per_accelerator_hour,as_of,source\n"
          "h100-sxm,on_demand,2.10,2026-11,Vendor X quote 1234\n"
          "tpu-v5p,reserved_3y,1.70,2026-10-15,\"Google account team, 3-year CUD\"\n")
TODAY = __import__("datetime").date(2026, 12, 3)


def _quotes_file(tmp_path, text, name="q.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_load_and_apply_quotes(tmp_path):
    from hwmodels.prices import apply_quotes, load_quotes

    cat = default_catalog()
    qs = load_quotes(_quotes_file(tmp_path, QUOTES), cat, today=TODAY)
    assert [(q.node, q.mode, q.usd_per_accelerator_hour, q.row) for q in qs] == [
        ("h100-sxm", "on_demand", 2.10, 1), ("tpu-v5p", "reserved_3y", 1.70, 2)]
    new = apply_quotes(cat, qs)
    h = new.get("h100-sxm")
    assert h.price_per_hour("on_demand") == pytest.approx(2.10 * 8)
    assert h.price_per_accelerator_hour("on_demand") == pytest.approx(2.10)
    p = h.price("on_demand")
    assert p.provider == "buyer quote" and p.as_of == "2026-11" and "Vendor X quote 1234" in p.source
    assert "q.csv row 1" in p.source and not p.stale(TODAY)
    assert new.get("tpu-v5p").price_per_hour("reserved_3y") == pytest.approx(1.70 * 4)
    # unquoted modes keep the catalog price; the input catalog is untouched
    assert h.price("spot") == cat.get("h100-sxm").price("spot")
    assert cat.get("h100-sxm").price("on_demand").provider == "AWS"
    only = apply_quotes(cat, qs, only_quotes=True)
    assert only.get("h100-sxm").modes == ("on_demand", "on_prem")
    assert only.get("mi300x").modes == ("on_prem",)
    with pytest.raises(ModelInputError, match="no buyer quote"):
        only.get("mi300x").price("on_demand")


@pytest.mark.parametrize("text, match", [
    ("node,mode,usd_per_accelerator_hour,source\nh100-sxm,spot,1,x\n",
     r"q\.csv: missing column 'as_of'; required columns: node, mode, usd_per_accelerator_hour, as_of, source"),
    ("node,mode,usd_per_gpu_hour,usd_per_accelerator_hour,as_of,source\n",
     r"unknown column 'usd_per_gpu_hour'; valid columns"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh300,spot,1,2026-01,x\n",
     r"q\.csv: row 1 \(line 2\), column 'node': unknown value 'h300'; valid choices: a100-40gb-sxm, .*h100-sxm"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,lease,1,2026-01,x\n",
     r"row 1 \(line 2\), column 'mode': unknown value 'lease'; valid choices: on_demand, reserved, reserved_3y, spot"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,on_prem,1,2026-01,x\n",
     r"column 'mode': unknown value 'on_prem'.*edit \[pricing\.on_prem\.capex\]"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,1,2026-01,x\nb200,spot,0,2026-01,x\n",
     r"row 2 \(line 3\), column 'usd_per_accelerator_hour': must be a finite number > 0, got '0'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,-2,2026-01,x\n",
     r"column 'usd_per_accelerator_hour': must be a finite number > 0, got '-2'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,inf,2026-01,x\n",
     r"column 'usd_per_accelerator_hour': must be a finite number > 0, got 'inf'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,nan,2026-01,x\n",
     r"column 'usd_per_accelerator_hour': must be a finite number > 0, got 'nan'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,$2,2026-01,x\n",
     r"column 'usd_per_accelerator_hour': not a number: '\$2'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,Nov 2026,x\n",
     r"column 'as_of': expected a date YYYY-MM or YYYY-MM-DD, got 'Nov 2026'"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2026-02-30,x\n",
     r"column 'as_of': .*not a calendar date"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2027-01,x\n",
     r"column 'as_of': '2027-01' is after today \(2026-12-03\)"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2026-01,\n",
     r"column 'source': empty"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2026-01,Vendor, with comma\n",
     r"row 1 \(line 2\): 6 cells but the header has 5"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2026-01\n",
     r"row 1 \(line 2\): 4 cells but the header has 5"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,spot,2,2026-01,a\n\nh100-sxm,spot,3,2026-02,b\n",
     r"row 2 \(line 4\): h100-sxm / spot is quoted twice \(also row 1\)"),
    ("node,mode,usd_per_accelerator_hour,as_of,source\n", r"no quotes \(only a header\)"),
    ("", r"empty file"),
])
def test_bad_quotes_name_file_row_column_and_choices(tmp_path, text, match):
    from hwmodels.prices import load_quotes

    with pytest.raises(ModelInputError, match=match):
        load_quotes(_quotes_file(tmp_path, text), default_catalog(), today=TODAY)


def test_quotes_missing_file_and_column_order(tmp_path):
    from hwmodels.prices import load_quotes

    with pytest.raises(ModelInputError, match="no such file"):
        load_quotes(tmp_path / "nope.csv")
    qs = load_quotes(_quotes_file(tmp_path, "\ufeffsource,as_of,node,usd_per_accelerator_hour,mode\n"
                                            "Lambda list,2026-09,b200, 4.99 ,on_demand\n"), today=TODAY)
    assert (qs[0].node, qs[0].mode, qs[0].usd_per_accelerator_hour) == ("b200", "on_demand", 4.99)


def test_software_stack_is_a_named_choice():
    """Every shipped node names its vendor software stack (the predictor's stack factor groups hardware by it);
    a bad value is an error naming the field and the choices; a hand-built node without it has none."""
    cat = default_catalog()
    stacks = {n.id: n.software_stack for n in cat}
    assert all(stacks.values()), stacks
    assert stacks["gaudi2"] == stacks["gaudi3"] == "synapseai" and stacks["tpu-v5e"] == stacks["tpu-v5p"]
    assert stacks["mi300x"] != stacks["h100-sxm"] and stacks["cpu-epyc-zen4-2c"] != stacks["mi300x"]
    d = _raw("mi300x")
    d["software_stack"] = "cuda12"
    with pytest.raises(ModelInputError, match=r"software_stack.*valid choices: cuda, rocm"):
        parse_node(d, "mi300x.toml")
    d = _raw("mi300x")
    del d["software_stack"]
    assert parse_node(d, "mi300x.toml").software_stack == ""


def test_same_die_is_a_sourced_catalog_reference(tmp_path):
    """[die] same_as names another catalog node on the same accelerator die (with a source); the node itself, an
    unknown id (in a catalog directory) or a missing source are errors naming the dotted field."""
    import shutil

    from hwmodels.catalog import check_catalog

    cat = default_catalog()
    pairs = {n.id: n.same_die_as for n in cat if n.same_die_as}
    assert pairs == {"h200-sxm": "h100-sxm", "a100-40gb-sxm": "a100-80gb-sxm", "b300": "gb300-nvl72",
                     "gb300-nvl72": "b300", "mi325x": "mi300x"}
    assert "GH100" in cat.get("h200-sxm").sources["die"]
    assert cat.get("h200-sxm").to_dict()["same_die_as"] == "h100-sxm" and cat.get("h100-sxm").same_die_as == ""
    for mutate, match in ((lambda die: die.update(same_as="h200-sxm"), r"die\.same_as: names the node itself"),
                          (lambda die: die.pop("source"), r"die\.source: missing"),
                          (lambda die: die.update(colour="green"), r"die\.colour")):
        d = _raw("h200-sxm")
        mutate(d["die"])
        with pytest.raises(ModelInputError, match=match):
            parse_node(d, "h200-sxm.toml")
    # an unknown sibling: load_catalog refuses the directory, check_catalog reports one line for the file
    for f in CAT_DIR.glob("*.toml"):
        shutil.copy(f, tmp_path / f.name)
    (tmp_path / "h200-sxm.toml").write_text((CAT_DIR / "h200-sxm.toml").read_text().replace(
        'same_as = "h100-sxm"', 'same_as = "h100-pcie"'))
    with pytest.raises(ModelInputError, match=r"h200-sxm\.toml: die\.same_as: unknown node 'h100-pcie'; valid "
                                              r"choices: a100-40gb-sxm, a100-80gb-sxm, b200"):
        load_catalog(tmp_path)
    chk = check_catalog(tmp_path, today="2026-12-03")
    assert [e for e in chk.errors if "die.same_as" in e] == [
        e for e in chk.errors if e.startswith("h200-sxm.toml: die.same_as: unknown node 'h100-pcie'")]
    assert len([e for e in chk.errors if "die.same_as" in e]) == 1
    # the sibling's own file being bad is reported once, there
    (tmp_path / "h200-sxm.toml").write_text((CAT_DIR / "h200-sxm.toml").read_text())
    (tmp_path / "h100-sxm.toml").write_text((CAT_DIR / "h100-sxm.toml").read_text().replace('kind = "gpu"', 'kind = "gpx"'))
    chk = check_catalog(tmp_path, today="2026-12-03")
    assert [e.split(":")[0] for e in chk.errors] == ["h100-sxm.toml"]


def test_matrix_unit_dim_is_an_optional_whole_number():
    """[accelerators] matrix_unit_dim: the systolic-array width (TPU v6e 256, v5e/v5p 128, Trainium 128), absent
    elsewhere (0);
    a fraction or a non-number is an error naming the field."""
    cat = default_catalog()
    assert {n.id: n.matrix_unit_dim for n in cat if n.matrix_unit_dim} == {"tpu-v5e": 128, "tpu-v5p": 128,
                                                                         "tpu-v6e": 256, "tpu7x": 256, "trn1": 128}
    assert cat.get("tpu-v6e").to_dict()["matrix_unit_dim"] == 256 and cat.get("h100-sxm").matrix_unit_dim == 0
    for bad, match in ((128.5, r"accelerators\.matrix_unit_dim: must be a whole number"),
                       ("wide", r"accelerators\.matrix_unit_dim: expected a number")):
        d = _raw("tpu-v6e")
        d["accelerators"]["matrix_unit_dim"] = bad
        with pytest.raises(ModelInputError, match=match):
            parse_node(d, "tpu-v6e.toml")
