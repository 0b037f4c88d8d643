"""The bad-input corpus (``tests/bad_inputs/``): every case is refused before anything runs.

Cases: every ``plans/*.yaml`` (its first line ``# expect: FRAGMENT``) run as
``hweval run --plan``, and the ``cli`` and ``api`` lists of ``cases.yaml``
(fit CSVs, cost CSVs and catalog files, results, bench/train values, the
kernel and workload registries' Python API). For each: exit code 2 (API:
``InputError``), exactly one line on stderr containing the expected field,
no traceback, and the store and output folders byte-for-byte unchanged.
CLI cases run in-process (``hweval.cli.main``) so the corpus stays fast; the
few marked ``subprocess: true`` go through a real interpreter.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml

from hwcore.errors import InputError

HERE = Path(__file__).resolve().parent / "bad_inputs"
REPO = HERE.parent.parent


def _expect_line(path: Path) -> str | None:
    first = path.read_bytes().split(b"\n", 1)[0].decode("utf-8", "replace")
    return first.removeprefix("# expect: ").strip() if first.startswith("# expect: ") else None


def _cases() -> list[tuple[str, dict[str, Any]]]:
    manifest = yaml.safe_load((HERE / "cases.yaml").read_text())
    out: list[tuple[str, dict[str, Any]]] = []
    for p in sorted((HERE / "plans").glob("*.yaml")):
        expect = _expect_line(p)
        if expect is not None:
            out.append((f"plan-{p.stem}", {"kind": "cli", "argv": ["run", "--plan", str(p)], "expect": expect}))
    out += [(c["id"], {"kind": "cli", **c}) for c in manifest["cli"]]
    out += [(c["id"], {"kind": "api", **c}) for c in manifest["api"]]
    return out


CASES = _cases()
#: known open defects (files owned elsewhere) stay in the corpus as expected failures, with the reason
PARAMS = [pytest.param(cid, c, id=cid,
                       marks=[pytest.mark.xfail(reason=c["xfail"], strict=False)] if c.get("xfail") else [])
          for cid, c in CASES]


def test_corpus_size_and_unique_ids():
    ids = [cid for cid, _ in CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 100, len(ids)
    # every plan file is a case: the ones without an '# expect:' line are listed in cases.yaml
    listed = " ".join(" ".join(map(str, c.get("argv", []))) for _, c in CASES)
    for p in (HERE / "plans").glob("*.yaml"):
        assert p.name in listed, f"{p.name}: no '# expect:' line and not in cases.yaml"


def _snapshot(*roots: Path) -> dict[str, str]:
    """Every file and folder under ``roots`` (hidden ones included) with a content hash."""
    snap: dict[str, str] = {}
    for root in roots:
        if not root.exists():
            continue
        for p in sorted(root.rglob("*")):
            snap[str(p)] = "dir" if p.is_dir() else hashlib.sha1(p.read_bytes()).hexdigest()
    return snap


def _fill(value: Any, subs: dict[str, str]) -> Any:
    if isinstance(value, str):
        for k, v in subs.items():
            value = value.replace("{" + k + "}", v)
    return value


def _run_cli(argv: list[str], capsys, cli, subprocess_: bool) -> tuple[int, str]:
    if subprocess_:
        r = cli(*argv, timeout=600)
        return r.returncode, r.stderr
    from hweval.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a skipped optional kernel module is not the point here
        rc = main(argv)
    return rc, capsys.readouterr().err


def _run_api(case: dict[str, Any], store: Path) -> str:
    call, name = case["call"], case["name"]
    params, kw = case.get("params") or {}, case.get("kw") or {}
    with warnings.catch_warnings(), pytest.raises(InputError) as exc:
        warnings.simplefilter("ignore")
        if call == "kernels.validate_params":
            from kernels import registry

            registry.validate_params(name, params)
        elif call == "kernels.run":
            from kernels import registry

            registry.run(name, params, store=store, **{"warmup_ms": 0, "measure_ms": 1, **kw})
        elif call == "kernels.sweep":
            from kernels import registry

            registry.sweep(name, [params], store=store, **{"warmup_ms": 0, "measure_ms": 1, **kw})
        elif call == "workloads.config":
            from workloads import registry

            registry.config_from_params(name, params)
        elif call == "workloads.run":
            import workloads

            workloads.run(name, params, store=store, **kw)
        else:  # pragma: no cover - a typo in cases.yaml
            raise AssertionError(f"unknown call {call!r}")
    return str(exc.value)


@pytest.mark.parametrize(("case_id", "case"), PARAMS)
def test_bad_input_is_refused_cleanly(case_id, case, tmp_path, store_path, capsys, cli, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.chdir(tmp_path)  # a default output folder would land here, inside the snapshot
    before = _snapshot(store_path, tmp_path, HERE)
    expect = case["expect"]
    if case["kind"] == "api":
        msg = _run_api(case, store_path)
        lines = msg.splitlines()
    else:
        subs = {"dir": str(HERE), "store": str(store_path), "out": str(out)}
        argv = [_fill(a, subs) for a in case["argv"]]
        if argv[0] == "run":
            argv += ["--out", str(out / "run"), "--store", str(store_path), "--no-progress"]
        rc, err = _run_cli(argv, capsys, cli, bool(case.get("subprocess")))
        assert "Traceback" not in err, err
        assert rc == 2, f"exit {rc}: {err}"
        # the refusal is one line; a warning about skipped rows may precede it, nothing else may
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("hweval: warning: ")]
        msg = lines[0] if lines else ""
        assert msg.startswith("hweval: error: "), err
    assert len(lines) == 1, lines
    assert expect in msg, msg
    assert _snapshot(store_path, tmp_path, HERE) == before, "something was written"


def test_api_cases_are_not_silently_finite():
    """Sanity of the corpus itself: YAML's .nan/.inf reach the API as real non-finite floats."""
    vals = [v for _, c in CASES if c["kind"] == "api"
            for v in {**(c.get("params") or {}), **(c.get("kw") or {})}.values()]
    assert any(isinstance(v, float) and math.isnan(v) for v in vals)
    assert any(isinstance(v, float) and math.isinf(v) for v in vals)
