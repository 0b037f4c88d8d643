"""hwmodels.dtypes: one dtype vocabulary that every kernel, the catalog and the predictor name their dtypes from."""

from __future__ import annotations

import pytest

from hwmodels import dtypes
from hwmodels.errors import ModelInputError


def test_sizes_and_kinds():
    assert {n: dtypes.nbytes(n) for n in dtypes.KERNEL_DTYPES} == {
        "fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}
    assert dtypes.nbytes("fp4") == 0.5 and dtypes.itemsize("fp4") == 1
    assert [n for n in dtypes.DTYPES if dtypes.get(n).low_precision] == [
        "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "fp8", "fp4"]
    assert not dtypes.get("int8").floating and not dtypes.get("int8").low_precision
    assert dtypes.from_framework_name("torch.bfloat16").name == "bf16"
    assert dtypes.from_framework_name("float32").name == "fp32"  # the storage type, not tf32
    assert dtypes.from_framework_name("complex64") is None
    with pytest.raises(ModelInputError, match="dtype: unknown value 'fp8x'; valid choices: bf16"):
        dtypes.get("fp8x")


def test_framework_names_resolve():
    torch = pytest.importorskip("torch")
    import numpy as np

    for d in dtypes.DTYPES.values():
        if d.torch and d.family != "fp8":
            assert getattr(torch, d.torch).itemsize == d.itemsize, d.name
        if d.numpy:
            assert np.dtype(d.numpy).itemsize == d.itemsize, d.name


def test_every_site_uses_the_vocabulary():
    from hwmodels import catalog
    from hwmodels.predict import layout
    from kernels import _util as U
    from kernels import registry as R

    assert set(catalog.DTYPES) <= set(dtypes.DTYPES) and set(layout.PRECISIONS) <= set(dtypes.DTYPES)
    assert U.DTYPE_BYTES == {n: dtypes.itemsize(n) for n in dtypes.KERNEL_DTYPES}
    for k in R.list_kernels():
        for p in k.params:
            if p.name == "dtype" and p.choices:
                assert set(p.choices) <= set(dtypes.KERNEL_DTYPES), k.name


def test_run_precision_maps_to_the_predictors():
    from hwmodels.dtypes import PREDICT_PRECISIONS, predict_precision
    from hwmodels.errors import ModelInputError

    assert predict_precision("bf16_autocast") == "bf16"  # autocast: bf16 GEMMs over fp32 master weights
    assert predict_precision("fp32") == "fp32" and predict_precision(None) == "fp32" and predict_precision("") == "fp32"
    assert predict_precision(None, default="bf16") == "bf16"
    for p in ("fp32", "bf16", "bf16_autocast", "fp16", "fp8"):
        assert predict_precision(p) in PREDICT_PRECISIONS
    with pytest.raises(ModelInputError, match="precision: unknown value 'int4'"):
        predict_precision("int4")
