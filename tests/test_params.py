"""hwcore.params: the one parameter type system (kernels, workloads, notebooks, plans, Slurm entries)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hwcore import params as P
from hwcore.errors import InputError


def _err(t: P.Type, raw, *, strict: bool = False) -> str:
    with pytest.raises(InputError) as exc:
        t.parse(raw, "x.f", strict=strict)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("x.f")
    return msg


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (P.Int(), "an integer"),
        (P.Int(min=1), "a positive integer"),
        (P.Int(min=0), "an integer >= 0"),
        (P.Int(min=1, max=64), "an integer in [1, 64]"),
        (P.Float(), "a finite number"),
        (P.Float(min=0, min_open=True), "a positive number"),
        (P.Float(min=0, min_open=True, unit="GiB"), "a positive number of GiB"),
        (P.Float(min=0, max=1, min_open=True, max_open=True), "a number in (0, 1)"),
        (P.Bool(), "a boolean (true/false)"),
        (P.Str(nonempty=True, oneline=True), "a non-empty one-line string"),
        (P.List(P.Int(min=1)), "a non-empty list (each a positive integer)"),
        (P.List(P.Float(), length=2), "a list of 2 (each a finite number)"),
    ],
)
def test_descriptions_name_the_range(t, text):
    assert t.describe() == text


def test_int_text_suffixes_and_refusals():
    t = P.Int(min=1, suffixes=True)
    assert t.parse("4KiB", "f") == 4096 and t.parse("2M", "f") == 2 * 2**20 and t.parse(np.int64(7), "f") == 7
    assert t.parse(8.0, "f") == 8 and t.parse("1e3", "f") == 1000
    assert "expected a positive integer, got 'abc'" in _err(t, "abc")
    assert "got 0" in _err(t, 0) and "got -3" in _err(t, -3)
    for bad in (True, 1.5, math.nan, math.inf, [1], None):
        _err(t, bad)
    assert "got '8'" in _err(t, "8", strict=True)  # plans and Slurm mappings: YAML types only


def test_float_is_always_finite():
    t = P.Float(min=0)
    assert t.parse("1e-3", "f") == 1e-3 and t.parse(2, "f") == 2.0 and isinstance(t.parse(2, "f"), float)
    for bad in (math.nan, math.inf, -math.inf, "nan", "inf", -1.0, True, "fast"):
        _err(t, bad)
    assert "expected a finite number, got nan" in _err(P.Float(), math.nan)
    assert "in (0, 1]" in _err(P.Float(min=0, max=1, min_open=True), 0)


def test_bool_spellings_follow_hwcore_values():
    t = P.Bool()
    assert t.parse("yes", "f") is True and t.parse("off", "f") is False and t.parse(np.bool_(True), "f") is True
    _err(t, "maybe")
    _err(t, 1)
    _err(t, "true", strict=True)


def test_choices_list_the_valid_values():
    t = P.Str(choices=("fp32", "bf16"), also=("",))
    assert t.parse(" bf16 ", "f") == "bf16" and t.parse("", "f") == ""
    msg = _err(t, "fp8x")
    assert "unknown value 'fp8x'; valid choices:" in msg and "bf16" in msg and "fp32" in msg
    assert P.DEVICE.parse("cuda:1", "f") == "cuda:1"
    assert "expected a device: cpu, cuda or cuda:N, got 'tpu'" in _err(P.DEVICE, "tpu")


def test_lists_dicts_and_optional_name_the_item():
    t = P.List(P.Int(min=1))
    assert t.parse([1, 2], "f") == [1, 2] and t.parse("1, 2", "f") == [1, 2]
    assert _err(t, []).startswith("x.f: expected a non-empty list")
    assert _err(t, [1, 0]).startswith("x.f[1]: expected a positive integer, got 0")
    assert P.List(P.Int(), nonempty=False).parse([], "f") == []
    assert _err(P.List(P.Float(), length=2), [0.2]).startswith("x.f: expected a list of 2")
    d = P.Dict(P.Str(), P.Int(min=0))
    assert d.parse({"a": 1}, "f") == {"a": 1}
    assert _err(d, {"a": -1}).startswith("x.f.a:")
    assert P.Optional(P.Int()).parse(None, "f") is None
    _err(P.Optional(P.Int()), "x")
    assert "x.f.b[1]: expected a finite number, got nan" in _err(P.AnyValue(), {"b": [1.0, math.nan]})


def test_annotations_of_parameter_cells():
    assert P.from_annotation("int") == P.Int()
    assert P.from_annotation("list[int]") == P.List(P.Int(), nonempty=False)
    assert P.from_annotation("dict[str, float]") == P.Dict(P.Str(), P.Float())
    assert P.from_annotation("Optional[str]") == P.Optional(P.Str())
    assert P.from_annotation("str | None") == P.Optional(P.Str())
    with pytest.raises(InputError, match="unsupported parameter annotation 'set\\[int\\]'"):
        P.from_annotation("set[int]")


def test_param_and_mapping():
    prm = P.Param(name="m", type=int, default=1024, min=1, help="rows")
    assert prm.parse("2K", where="gemm") == 2048
    assert prm.describe().startswith("m: int = 1024  [1..]")
    with pytest.raises(InputError, match=r"^gemm\.m: expected a positive integer, got '0'$"):
        prm.parse("0", where="gemm")
    with pytest.raises(ValueError, match="must be int, float, bool, str"):
        P.Param(name="x", type=complex, default=0)
    with pytest.raises(InputError):
        P.Param(name="x", type=int, default=0, min=1)  # a default outside its own range
    out = P.parse_mapping({"m": "8"}, [prm, P.Param(name="dtype", type=str, default="fp32", choices=("fp32",))],
                          where="gemm")
    assert out == {"m": 8, "dtype": "fp32"}
    with pytest.raises(InputError, match="gemm: unknown parameter 'size'; valid choices: m"):
        P.parse_mapping({"size": 1}, [prm], where="gemm")


def test_registries_share_the_error_shape():
    """The kernel registry, the workload config and a plan say the same thing for the same bad value."""
    from kernels import registry as kernels
    from workloads import registry as workloads

    with pytest.raises(InputError, match=r"^gemm\.m: expected a positive integer, got 'abc'"):
        kernels.validate_params("gemm", {"m": "abc"})
    with pytest.raises(InputError, match=r"^mlp_regressor\.batch_size: expected a positive integer, got 'abc'$"):
        workloads.config_from_params("mlp_regressor", {"batch_size": "abc"})
    with pytest.raises(InputError, match=r"^mlp_regressor\.lr: expected a positive number, got nan$"):
        workloads.config_from_params("mlp_regressor", {"lr": math.nan})
    with pytest.raises(InputError, match=r"^measure_ms: expected a number of ms in \(0, 3600000\], got inf$"):
        kernels.check_budgets(1.0, math.inf)
