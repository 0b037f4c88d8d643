"""``hweval catalog list|show|check``: output shapes, staleness, buyer quotes, one line per bad file, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hweval.cli import main

REPO = Path(__file__).resolve().parent.parent
CAT = REPO / "data" / "catalog"
TODAY = "2026-12-03"


def run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list_json_has_every_node_with_dated_prices_and_stale_flags(capsys):
    rc, out, err = run(capsys, "catalog", "list", "--json", "--today", TODAY)
    assert rc == 0, err
    d = json.loads(out)
    ids = [n["id"] for n in d["nodes"]]
    for nid in ("a100-40gb-sxm", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200", "mi300x", "tpu-v5e", "tpu-v5p",
                "gaudi2", "gaudi3", "l40s", "cpu-epyc-zen4-2c"):
        assert nid in ids
    h100 = d["nodes"][ids.index("h100-sxm")]
    assert h100["accelerators_per_node"] == 8 and h100["peak_dense_bf16_flops_per_s"] == pytest.approx(989.4e12)
    od = h100["prices"]["on_demand"]
    assert od["available"] and od["usd_per_accelerator_hour"] == pytest.approx(55.04 / 8)
    assert od["as_of"] == "2025-08" and od["stale"] is True and od["age_months"] == pytest.approx(16.1, abs=0.1)
    assert od["provider"] == "AWS" and "p5.48xlarge" in od["instance"] and od["source"]
    assert h100["prices"]["reserved_3y"] == {"available": False, "reason": "not listed in the catalog file"}
    gaudi = d["nodes"][ids.index("gaudi3")]
    assert not gaudi["prices"]["on_demand"]["available"] and gaudi["prices"]["on_demand"]["reason"]
    # judged on the day the prices were listed nothing rented is stale
    rc, out, _ = run(capsys, "catalog", "list", "--json", "--today", "2026-08-06")
    h200 = next(n for n in json.loads(out)["nodes"] if n["id"] == "h200-sxm")
    assert h200["prices"]["on_demand"]["stale"] is False and h200["prices"]["on_demand"]["age_months"] == 0


def test_list_text_marks_stale_prices(capsys):
    rc, out, _ = run(capsys, "catalog", "list", "--today", TODAY)
    assert rc == 0
    row = next(line for line in out.splitlines() if line.startswith("h100-sxm"))
    assert "$6.88 (2025-08)*" in row and "989.4 TFLOP/s" in row and "79.65 GiB" in row
    assert "* stale: listed more than 12 months before 2026-12-03" in out


def test_list_with_buyer_quotes(capsys, tmp_path):
    q = tmp_path / "quotes.csv"
    q.write_text("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,on_demand,2.25,2026-11,Vendor X\n")
    rc, out, err = run(capsys, "catalog", "list", "--json", "--today", TODAY, "--prices", str(q))
    assert rc == 0, err
    od = next(n for n in json.loads(out)["nodes"] if n["id"] == "h100-sxm")["prices"]["on_demand"]
    assert od["provider"] == "buyer quote" and od["usd_per_accelerator_hour"] == pytest.approx(2.25)
    assert od["stale"] is False
    q.write_text("node,mode,usd_per_accelerator_hour,as_of,source\nh100-sxm,on_demand,-1,2026-11,Vendor X\n")
    rc, out, err = run(capsys, "catalog", "list", "--prices", str(q))
    assert rc == 2 and out == ""
    assert "quotes.csv: row 1 (line 2), column 'usd_per_accelerator_hour'" in err and len(err.splitlines()) == 1


def test_show_json_and_text_carry_every_source(capsys):
    rc, out, err = run(capsys, "catalog", "show", "tpu-v5p", "--json", "--today", TODAY)
    assert rc == 0, err
    d = json.loads(out)
    assert d["links"]["scale_up_size"] == 6144 and d["links"]["intra_node_topology"] == "torus3d"
    assert d["links"]["intra_node_unidir_bytes_per_s"] == pytest.approx(600e9)
    assert d["links"]["inter_node_bytes_per_s_per_accelerator"] == pytest.approx(6.25e9)
    for part in ("accelerators", "memory", "links", "power"):
        assert len(d[part]["source"]) > 20, part
    assert all(p["source"] for p in d["peaks"].values())
    assert d["prices"]["on_prem"]["available"] is False and "Google does not sell" in d["prices"]["on_prem"]["reason"]
    assert d["prices"]["reserved_3y"]["term"] == "3-year committed use discount"
    rc, out, _ = run(capsys, "catalog", "show", "h100-sxm", "--today", TODAY)
    assert rc == 0
    assert "450 GB/s per direction" in out and "derivation: 132 units x 4096 FLOP/clock x 1.83 GHz" in out
    assert "capex source:" in out and "*stale*" in out
    # one source line per peak, memory, links, power, accelerators and rented price
    assert out.count("source:") >= 8 + 4 + 3


def test_show_unknown_node_exit_2_lists_ids(capsys):
    rc, out, err = run(capsys, "catalog", "show", "h300")
    assert rc == 2 and out == ""
    assert "unknown value 'h300'; valid choices: a100-40gb-sxm" in err and "tpu-v5e" in err


def test_check_good_catalog_exit_0_with_summary(capsys):
    rc, out, err = run(capsys, "catalog", "check", "--today", TODAY)
    assert rc == 0, err
    n = len(list(CAT.glob("*.toml")))
    assert n >= 17 and f"{n} file(s) valid" in out and "sparse = 2 x dense" in out and "older than 12 months on 2026-12-03" in out


def _bad_catalog(tmp_path: Path) -> Path:
    d = tmp_path / "cat"
    shutil.copytree(CAT, d)
    sub = {
        # the with-sparsity FP8 figure pasted as dense
        "h100-sxm.toml": ("dense_tflops = 1978.9\nsparse_tflops = 3957.8\nsource = \"NVIDIA H100 datasheet: FP8",
                          "dense_tflops = 3957.8\nsparse_tflops = 3957.8\nsource = \"NVIDIA H100 datasheet: FP8"),
        "mi300x.toml": ('id = "mi300x"', 'id = "mi300"'),
        "b200.toml": ('as_of = "2025-08"', 'as_of = "2027-01"'),
        "l40s.toml": ('intra_node_topology = "pcie"', 'intra_node_topology = "pci"'),
        "gaudi2.toml": ("bandwidth_TBps = 2.45", "bandwidth_TBs = 2.45"),
    }
    for name, (old, new) in sub.items():
        f = d / name
        text = f.read_text()
        assert old in text, name
        f.write_text(text.replace(old, new, 1))
    (d / "tpu-v5e.toml").write_text((d / "tpu-v5e.toml").read_text().replace(
        'source = "Cloud TPU v5e docs: \'HBM2', 'note = "Cloud TPU v5e docs: \'HBM2', 1))
    return d


def test_check_bad_catalog_one_line_per_bad_file_exit_2(capsys, tmp_path):
    d = _bad_catalog(tmp_path)
    rc, out, err = run(capsys, "catalog", "check", "--catalog", str(d), "--today", TODAY)
    assert rc == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 6 + 1, err  # six bad files and a count
    by_file = {line.split(": ")[2]: line for line in lines[:-1]}
    assert "peak.fp8.sparse_tflops: with-sparsity figure must be 2x the dense figure" in by_file["h100-sxm.toml"]
    assert "id: 'mi300' does not match the file name" in by_file["mi300x.toml"]
    assert "pricing.on_demand.as_of: '2027-01' is after today (2026-12-03)" in by_file["b200.toml"]
    assert "links.intra_node_topology: unknown value 'pci'; valid choices: switch, mesh" in by_file["l40s.toml"]
    assert "memory.bandwidth_TBps: missing required key" in by_file["gaudi2.toml"]
    assert "memory.source: missing" in by_file["tpu-v5e.toml"]
    assert lines[-1].endswith(f"6 of {len(list(CAT.glob('*.toml')))} file(s) invalid")
    assert not any(g in err for g in ("a100-40gb-sxm.toml", "h200-sxm.toml", "gaudi3.toml"))


def test_check_exit_codes_from_a_subprocess(cli, tmp_path):
    bad = tmp_path / "one"
    bad.mkdir()
    (bad / "x.toml").write_text("id = [")
    r = cli("catalog", "check", "--catalog", str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert "x.toml: not valid TOML" in r.stderr
    r = cli("catalog", "check", "--catalog", str(tmp_path / "missing"))
    assert r.returncode == 2 and "no such file or directory" in r.stderr
    r = cli("catalog", "list", "--today", "2026-13-01")
    assert r.returncode == 2 and "--today" in r.stderr


def test_single_file_catalog(capsys):
    rc, out, err = run(capsys, "catalog", "check", "--catalog", str(CAT / "h100-sxm.toml"), "--today", TODAY)
    assert rc == 0 and "1 file(s) valid (h100-sxm)" in out
