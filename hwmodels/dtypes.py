"""The one dtype vocabulary: names, bytes per element, framework names, floating / low-precision.

Every module that names a dtype takes it from here: the kernels' ``dtype``
parameters (``kernels/gemm.py``, ``stream.py``, ``fused.py``, ``collectives.py``,
``optim.py``, ``triton_softmax.py``), the catalog's peak-throughput precisions
(:data:`PEAK_DTYPES`) and the predictor's activation bytes. The framework names
are plain strings (``torch.<torch>``, ``jax.numpy.<jax>``, ``numpy.<numpy>``);
the kernels resolve them to torch / JAX objects, so this module imports
nothing (hwmodels is the bottom layer).

Sizes are the IEEE 754 / vendor storage formats: fp64 8 bytes, fp32 4, bf16
and fp16 2, the two OCP FP8 formats (E4M3, E5M2; "OCP 8-bit Floating Point
Specification", 2023) 1, FP4 (E2M1, OCP Microscaling Formats v1.0) half a byte.
``tf32`` is a tensor-core math mode over fp32 storage (NVIDIA A100 whitepaper:
10-bit mantissa inputs, fp32 accumulate), so it occupies 4 bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwmodels.errors import choices_error


@dataclass(frozen=True, kw_only=True)
class DType:
    """One dtype name and what it means.

    ``bits``: storage bits per element; ``mantissa_bits``: explicit significand
    bits of the arithmetic (tf32: 10 although stored in 32 bits);
    ``floating``; ``torch`` / ``jax`` / ``numpy``: attribute names in those
    packages (None: the package has no such type); ``storage``: the dtype a math
    mode stores in (tf32 -> fp32); ``family``: the catalog's name for a format
    family (fp8_e4m3 -> fp8).
    """

    name: str
    bits: int | float
    mantissa_bits: int
    floating: bool = True
    torch: str | None = None
    jax: str | None = None
    numpy: str | None = None
    storage: str | None = None
    family: str | None = None

    @property
    def bytes(self) -> float:
        """Storage bytes per element (``bits / 8``)."""
        return self.bits / 8

    @property
    def itemsize(self) -> int:
        """Whole bytes per element of the in-memory tensor (a sub-byte type is packed; at least 1)."""
        return max(1, int(self.bits // 8))

    @property
    def low_precision(self) -> bool:
        """A floating type with fewer significand bits than fp32 (23): bf16, fp16, tf32, fp8, fp4."""
        return self.floating and self.mantissa_bits < 23


_ALL = (
    DType(name="fp64", bits=64, mantissa_bits=52, torch="float64", jax="float64", numpy="float64"),
    DType(name="fp32", bits=32, mantissa_bits=23, torch="float32", jax="float32", numpy="float32"),
    DType(name="tf32", bits=32, mantissa_bits=10, torch="float32", jax="float32", numpy="float32", storage="fp32"),
    DType(name="bf16", bits=16, mantissa_bits=7, torch="bfloat16", jax="bfloat16"),
    DType(name="fp16", bits=16, mantissa_bits=10, torch="float16", jax="float16", numpy="float16"),
    DType(name="fp8_e4m3", bits=8, mantissa_bits=3, torch="float8_e4m3fn", family="fp8"),
    DType(name="fp8_e5m2", bits=8, mantissa_bits=2, torch="float8_e5m2", family="fp8"),
    DType(name="fp8", bits=8, mantissa_bits=3, family="fp8"),  # the format family (catalog peaks)
    DType(name="int8", bits=8, mantissa_bits=0, floating=False, torch="int8", jax="int8", numpy="int8"),
    DType(name="fp4", bits=4, mantissa_bits=1, family="fp4"),
)
#: name -> :class:`DType`
DTYPES: dict[str, DType] = {d.name: d for d in _ALL}

#: the dtypes a kernel's ``dtype`` parameter may name (storage types and the tf32 math mode), in listing order
KERNEL_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2")
#: the floating storage types every framework has (elementwise, reduction and collective kernels)
FLOAT_DTYPES = ("fp64", "fp32", "bf16", "fp16")
#: the precisions a catalog entry gives peak throughput for
PEAK_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
#: the training precisions the predictor models (GEMM inputs in that type; fp8 and fp4 keep 16-bit activations)
PREDICT_PRECISIONS = ("bf16", "fp8", "fp16", "fp32", "fp4")
#: of those, the types narrower than 16 bits: only the transformer linears run in them (attention and the LM head
#: stay in 16 bits), and only on hardware with units for them (a catalog peak)
NARROW_PRECISIONS = ("fp8", "fp4")


#: a training run's precision setting (the workloads' ``precision`` knob, a record's) -> the predictor's precision:
#: autocast runs the GEMMs in bf16 over fp32 master weights, which the predictor models as bf16
_RUN_PRECISION = {"fp32": "fp32", "bf16": "bf16", "bf16_autocast": "bf16", "fp16": "fp16", "fp16_autocast": "fp16",
                  "fp8": "fp8"}


def predict_precision(run_precision: str | None, default: str = "fp32") -> str:
    """The :data:`PREDICT_PRECISIONS` member a run's precision setting is modelled as (``default`` when unset);
    an unknown setting lists the valid ones."""
    if run_precision in (None, ""):
        return default
    if run_precision not in _RUN_PRECISION:
        raise choices_error("precision", run_precision, _RUN_PRECISION)
    return _RUN_PRECISION[run_precision]


def get(name: str) -> DType:
    """The :class:`DType` named ``name``; an unknown name lists the valid ones."""
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise choices_error("dtype", name, DTYPES) from None


def nbytes(name: str) -> float:
    """Storage bytes per element of ``name`` (fp4: 0.5)."""
    return get(name).bytes


def itemsize(name: str) -> int:
    """Whole bytes per element of ``name`` (``DType.itemsize``)."""
    return get(name).itemsize


def from_framework_name(text: str) -> DType | None:
    """The dtype a torch / JAX / numpy name (``"bfloat16"``, ``"torch.float16"``) denotes; None if none does.

    A name several of ours share (``float32``: fp32 and tf32) gives the storage type.
    """
    short = str(text).rsplit(".", 1)[-1]
    for d in _ALL:
        if d.storage is None and short in (d.torch, d.jax, d.numpy):
            return d
    return None


__all__ = ["DType", "DTYPES", "FLOAT_DTYPES", "KERNEL_DTYPES", "PEAK_DTYPES", "PREDICT_PRECISIONS", "from_framework_name", "get",
           "itemsize", "nbytes"]
