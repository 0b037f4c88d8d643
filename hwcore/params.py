"""One parameter type system: typed values with ranges, from text or from Python values.

Kernels (:mod:`kernels.registry`), workloads (:mod:`workloads.config`), the
notebooks' ``parameters`` cells and plans (:mod:`hweval.plan`) and the Slurm
node entries (:mod:`hweval.slurm`) all type their parameters with these
classes, so one bad value gives the same one-line
:class:`~hwcore.errors.InputError` wherever it comes from::

    gemm.m: expected a positive integer, got 'abc'
    plans/x.yaml: matrix[2].params.workload_params.batch_size: expected a positive integer, got 'abc'

A type's :meth:`Type.parse` takes a raw value and the dotted field name and
returns the validated value. ``strict=False`` (the default) also accepts the
text spellings of ``--set key=value`` (``"4KiB"``, ``"yes"``, ``"1e-3"``);
``strict=True`` (YAML plans, Slurm mappings) accepts only values of the type
itself (an int may be given as an integral float, a float as an int).

Floats are always finite (NaN and infinities are refused: a NaN time budget
never stops, a NaN target is never reached). Ranges are closed unless
``min_open``/``max_open`` say otherwise. Choices list the valid values in the
error (:func:`~hwcore.errors.choices_error`), as papermill's registries do.
"""

from __future__ import annotations

import ast
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hwcore.errors import InputError, choices_error
from hwcore.values import parse_bool

#: Integer suffixes (binary, as message sizes are quoted: nccl-tests' ``-b 1K`` means 1024).
INT_SUFFIX = {"k": 2**10, "ki": 2**10, "kib": 2**10, "m": 2**20, "mi": 2**20, "mib": 2**20,
              "g": 2**30, "gi": 2**30, "gib": 2**30}
_INT_RE = re.compile(r"^\s*([+-]?[0-9]+)\s*([a-zA-Z]*)\s*$")


def fail(field_name: str, expected: str, got: Any) -> InputError:
    """The one error shape: ``FIELD: expected WHAT, got VALUE``."""
    return InputError(f"{field_name}: expected {expected}, got {_show(got)}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _range_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{_num(lo)}, {_num(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {_num(lo)}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {_num(hi)}"
    return ""


class Type:
    """A value type with its range; subclasses implement ``_parse`` and ``describe``."""

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _parse(self, raw: Any, field_name: str, strict: bool) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, raw: Any, field_name: str, *, strict: bool = False) -> Any:
        """``raw`` validated (and converted) or :class:`InputError` naming ``field_name``."""
        return self._parse(raw, field_name, strict)

    def __str__(self) -> str:
        return self.describe()


@dataclass(frozen=True)
class _Ranged(Type):
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    unit: str = ""
    choices: tuple[Any, ...] | None = None

    def _in_range(self, val: float) -> bool:
        if self.min is not None and (val < self.min or (self.min_open and val == self.min)):
            return False
        return not (self.max is not None and (val > self.max or (self.max_open and val == self.max)))

    def _check(self, val: Any, raw: Any, field_name: str) -> Any:
        if self.choices is not None and val not in self.choices:
            raise choices_error(field_name, raw, self.choices)
        if not self._in_range(val):
            raise fail(field_name, self.describe(), raw)
        return val

    def _words(self, noun: str, article: str) -> str:
        of = f" of {self.unit}" if self.unit else ""
        if self.min == 0 and self.min_open and self.max is None:
            return f"a positive {noun}{of}"
        if self.min == 1 and not self.min_open and self.max is None and noun == "integer":
            return f"a positive {noun}{of}"
        rng = _range_text(self.min, self.max, self.min_open, self.max_open)
        return f"{article} {noun}{of}" + (f" {rng}" if rng else "")


@dataclass(frozen=True)
class Int(_Ranged):
    """An integer; ``suffixes=True`` also reads ``4K``/``4KiB``/``1M``/``2G`` (binary) from text."""

    suffixes: bool = False

    def describe(self) -> str:
        return self._words("integer", "an")

    def _parse(self, raw: Any, field_name: str, strict: bool) -> int:
        val: int | None = None
        if isinstance(raw, bool):
            val = None
        elif isinstance(raw, numbers.Integral):  # int, numpy integers
            val = int(raw)
        elif isinstance(raw, numbers.Real) and math.isfinite(float(raw)) and float(raw).is_integer():
            val = int(raw)
        elif isinstance(raw, str) and not strict:
            mt = _INT_RE.match(raw)
            if mt and (mt.group(2) == "" or (self.suffixes and mt.group(2).lower() in INT_SUFFIX)):
                val = int(mt.group(1)) * INT_SUFFIX.get(mt.group(2).lower(), 1)
            elif mt is None:
                try:
                    f = float(raw)
                except ValueError:
                    f = math.nan
                if math.isfinite(f) and f.is_integer():
                    val = int(f)
        if val is None:
            raise fail(field_name, self.describe(), raw)
        return self._check(val, raw, field_name)


@dataclass(frozen=True)
class Float(_Ranged):
    """A finite number (NaN and infinities are always refused)."""

    def describe(self) -> str:
        words = self._words("number", "a")
        return "a finite number" if words == "a number" else words

    def _parse(self, raw: Any, field_name: str, strict: bool) -> float:
        val: float | None = None
        if isinstance(raw, bool):
            val = None
        elif isinstance(raw, numbers.Real):
            val = float(raw)
        elif isinstance(raw, str) and not strict:
            try:
                val = float(raw.strip())
            except ValueError:
                val = None
        if val is None or not math.isfinite(val):
            raise fail(field_name, self.describe(), raw)
        return self._check(val, raw, field_name)


@dataclass(frozen=True)
class Bool(Type):
    """``true``/``false`` (text: the :mod:`hwcore.values` spellings, e.g. ``yes``/``no``, ``1``/``0``)."""

    def describe(self) -> str:
        return "a boolean (true/false)"

    def _parse(self, raw: Any, field_name: str, strict: bool) -> bool:
        if isinstance(raw, bool) or (type(raw).__module__ == "numpy" and type(raw).__name__ in ("bool", "bool_")):
            return bool(raw)
        if isinstance(raw, str) and not strict and parse_bool(raw) is not None:
            return bool(parse_bool(raw))
        raise fail(field_name, self.describe(), raw)


@dataclass(frozen=True)
class Str(Type):
    """Text; ``choices`` lists the valid values, ``nonempty``/``oneline`` restrict free text."""

    choices: tuple[str, ...] | None = None
    nonempty: bool = False
    oneline: bool = False
    #: extra accepted values beside ``choices`` (e.g. ``""`` = automatic), listed in the error too
    also: tuple[str, ...] = ()
    #: a regular expression the whole value must match, described by ``what`` (e.g. ``cpu, cuda or cuda:N``)
    pattern: str | None = None
    what: str = ""

    def describe(self) -> str:
        if self.what:
            return self.what
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in (*self.also, *self.choices))
        words = [w for w, on in (("non-empty", self.nonempty), ("one-line", self.oneline)) if on]
        return "a " + " ".join([*words, "string"])

    def _parse(self, raw: Any, field_name: str, strict: bool) -> str:
        if not isinstance(raw, str):
            raise fail(field_name, self.describe(), raw)
        val = raw.strip()
        if self.choices is not None:
            if val not in self.choices and val not in self.also:
                valid = [*self.choices, *(repr(a) if a == "" else a for a in self.also)]
                raise choices_error(field_name, raw, valid)
            return val
        if (self.nonempty and not val) or (self.oneline and any(c in raw for c in "\n\r")):
            raise fail(field_name, self.describe(), raw)
        if self.pattern is not None and not re.fullmatch(self.pattern, val) and val not in self.also:
            raise fail(field_name, self.describe(), raw)
        return val


@dataclass(frozen=True)
class List(Type):
    """A list of ``item``; non-empty unless ``nonempty=False``; text is comma-separated."""

    item: Type = field(default_factory=lambda: AnyValue())
    nonempty: bool = True
    max_len: int | None = None
    length: int | None = None

    def describe(self) -> str:
        if self.length is not None:
            size = f"a list of {self.length}"
        else:
            size = "a non-empty list" if self.nonempty else "a list"
        return f"{size} (each {self.item.describe()})"

    def _parse(self, raw: Any, field_name: str, strict: bool) -> list[Any]:
        if isinstance(raw, str) and not strict:
            raw = [s for s in (t.strip() for t in raw.split(",")) if s]
        if not isinstance(raw, list | tuple):
            raise fail(field_name, self.describe(), raw)
        if (self.nonempty and not raw) or (self.length is not None and len(raw) != self.length):
            raise fail(field_name, self.describe(), raw)
        if self.max_len is not None and len(raw) > self.max_len:
            raise fail(field_name, f"at most {self.max_len} values", f"{len(raw)} values")
        return [self.item.parse(v, f"{field_name}[{i}]", strict=strict) for i, v in enumerate(raw)]


@dataclass(frozen=True)
class Dict(Type):
    """A mapping of ``key`` to ``value`` (``str`` keys by default)."""

    key: Type = field(default_factory=lambda: Str())
    value: Type = field(default_factory=lambda: AnyValue())

    def describe(self) -> str:
        return "a mapping"

    def _parse(self, raw: Any, field_name: str, strict: bool) -> dict[Any, Any]:
        if not isinstance(raw, Mapping):
            raise fail(field_name, self.describe(), raw)
        out = {}
        for k, v in raw.items():
            key = self.key.parse(k, f"{field_name} key {k!r}", strict=strict)
            out[key] = self.value.parse(v, f"{field_name}.{key}", strict=strict)
        return out


@dataclass(frozen=True)
class Optional(Type):
    """``None`` or ``inner``."""

    inner: Type = field(default_factory=lambda: AnyValue())

    def describe(self) -> str:
        return f"{self.inner.describe()} or None"

    def _parse(self, raw: Any, field_name: str, strict: bool) -> Any:
        if raw is None:
            return None
        try:
            return self.inner.parse(raw, field_name, strict=strict)
        except InputError:
            raise fail(field_name, self.describe(), raw) from None


@dataclass(frozen=True)
class AnyValue(Type):
    """Anything, except non-finite floats anywhere inside it."""

    def describe(self) -> str:
        return "any value"

    def _parse(self, raw: Any, field_name: str, strict: bool) -> Any:
        _finite_inside(raw, field_name)
        return raw


def _finite_inside(value: Any, field_name: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise fail(field_name, "a finite number", value)
    if isinstance(value, Mapping):
        for k, v in value.items():
            _finite_inside(v, f"{field_name}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _finite_inside(v, f"{field_name}[{i}]")


#: A torch device string.
DEVICE = Str(pattern=r"cpu|cuda(:[0-9]+)?", what="a device: cpu, cuda or cuda:N")


# -- building types ------------------------------------------------------------------------
_SCALARS: dict[type, type[Type]] = {int: Int, float: Float, bool: Bool, str: Str}


def scalar(tp: type, **kw: Any) -> Type:
    """The :class:`Type` of a Python scalar type (``int``, ``float``, ``bool``, ``str``) with ``kw`` ranges."""
    if tp not in _SCALARS:
        raise TypeError(f"no parameter type for {tp!r}; valid: int, float, bool, str")
    cls = _SCALARS[tp]
    if cls is Bool:
        kw.pop("choices", None)
        return Bool()
    if cls is Str:
        kw = {k: v for k, v in kw.items() if k in ("choices", "nonempty", "oneline", "also", "pattern", "what")}
        if kw.get("choices") is not None:
            kw["choices"] = tuple(kw["choices"])
    elif kw.get("choices") is not None:
        kw["choices"] = tuple(kw["choices"])
    return cls(**kw)


def from_annotation(text: str, field_name: str = "annotation") -> Type:
    """The :class:`Type` of a parameter-cell annotation: ``int``, ``float``, ``str``, ``bool``,
    ``list``/``list[T]``, ``dict``/``dict[K, V]``, ``Optional[T]``, ``T | None``, ``Any``."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise InputError(f"{field_name}: cannot parse annotation {text!r}") from None
    return _from_ast(node, text, field_name)


def _from_ast(node: ast.expr, text: str, field_name: str) -> Type:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted annotation
        return from_annotation(node.value, field_name)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [node.left, node.right]
        nones = [p for p in parts if isinstance(p, ast.Constant) and p.value is None
                 or isinstance(p, ast.Name) and p.id == "None"]
        if len(nones) == 1:
            other = next(p for p in parts if p is not nones[0])
            return Optional(_from_ast(other, text, field_name))
    if isinstance(node, ast.Name):
        simple = {"int": Int(), "float": Float(), "bool": Bool(), "str": Str(), "list": List(nonempty=False),
                  "dict": Dict(), "Any": AnyValue(), "object": AnyValue()}
        if node.id in simple:
            return simple[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        outer = node.value.id
        if outer in ("list", "List") and len(args) == 1:
            return List(_from_ast(args[0], text, field_name), nonempty=False)
        if outer in ("dict", "Dict") and len(args) == 2:
            return Dict(_from_ast(args[0], text, field_name), _from_ast(args[1], text, field_name))
        if outer == "Optional" and len(args) == 1:
            return Optional(_from_ast(args[0], text, field_name))
    raise InputError(f"{field_name}: unsupported parameter annotation {text!r}; "
                     "valid: int, float, str, bool, list[T], dict[K, V], Optional[T], Any")


# -- named parameters ----------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Param:
    """One named, typed parameter with a default and a help line.

    ``type`` is ``int``, ``float``, ``bool`` or ``str`` (ranges from ``min``/
    ``max``/``choices``/``unit``/``suffixes``) or a :class:`Type` instance.
    """

    name: str
    type: Any
    default: Any
    help: str = ""
    choices: tuple[Any, ...] | None = None
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    unit: str = ""
    suffixes: bool | None = None
    spec: Type = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.type, Type):
            spec = self.type
        elif self.type in _SCALARS:
            kw: dict[str, Any] = {"choices": self.choices, "min": self.min, "max": self.max,
                                  "min_open": self.min_open, "unit": self.unit}
            if self.type is int:
                kw["suffixes"] = True if self.suffixes is None else self.suffixes
            spec = scalar(self.type, **kw)
        else:
            raise ValueError(f"Param.type of {self.name!r} must be int, float, bool, str or a hwcore.params.Type")
        object.__setattr__(self, "spec", spec)
        if self.default is not None:
            self.parse(self.default, where="<default>")

    @property
    def type_name(self) -> str:
        return self.type.__name__ if isinstance(self.type, type) else type(self.type).__name__.lower()

    def describe(self) -> str:
        s = f"{self.name}: {self.type_name} = {self.default!r}"
        if self.choices:
            s += f"  [{'|'.join(str(c) for c in self.choices)}]"
        elif self.min is not None or self.max is not None:
            s += f"  [{'' if self.min is None else self.min}..{'' if self.max is None else self.max}]"
        if self.help:
            s += f"  # {self.help}"
        return s

    def parse(self, raw: Any, *, where: str, strict: bool = False) -> Any:
        """``raw`` (a string from ``--set`` or a Python value) validated; errors name ``where.name``."""
        return self.spec.parse(raw, f"{where}.{self.name}", strict=strict)


def parse_mapping(raw: Mapping[str, Any] | None, params: Iterable[Param], *, where: str, strict: bool = False,
                  defaults: bool = True) -> dict[str, Any]:
    """``raw`` checked against ``params``: unknown keys refused (listing the valid ones), values typed.

    With ``defaults`` every parameter missing from ``raw`` takes its default.
    """
    by_name = {p.name: p for p in params}
    raw = dict(raw or {})
    for key in raw:
        if key not in by_name:
            valid = ", ".join(by_name) or "(none)"
            raise InputError(f"{where}: unknown parameter {key!r}; valid choices: {valid}")
    out = {k: by_name[k].parse(v, where=where, strict=strict) for k, v in raw.items()}
    if defaults:
        out = {p.name: out.get(p.name, p.default) for p in by_name.values()}
    return out
