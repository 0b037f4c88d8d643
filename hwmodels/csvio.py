"""Read a user's CSV for a model, reporting (never silently dropping) bad rows.

``read_numeric(path, required=[...], optional=[...])`` returns the clean rows
and a :class:`BadRows` report: how many rows had a missing or non-numeric
value in a named column and the first such line number (1-based, counting the
header and any leading ``#`` comment lines, which are skipped). A named column absent from the file is an error naming it and
listing the columns present.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hwmodels.errors import ModelInputError


@dataclass(frozen=True)
class BadRows:
    count: int
    first_line: int | None
    columns: tuple[str, ...] = ()

    def message(self, path: str) -> str:
        cols = ", ".join(self.columns)
        return (f"{path}: skipped {self.count} row(s) with missing or non-numeric values in {cols} "
                f"(first at line {self.first_line})")

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "first_line": self.first_line, "columns": list(self.columns)}


#: Largest magnitude accepted in a numeric column: far beyond any physical size, time or rate, and
#: small enough that the fits' squares and products stay finite in float64 (max ~1.8e308).
MAX_ABS = 1e100


def read_csv(path: str | os.PathLike[str], *, field: str = "FILE"):
    """The whole CSV as strings (blank lines kept, so line numbers stay right)."""
    import pandas as pd

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ModelInputError(f"{field}: no such file {p!r}")
    skip = _leading_comments(p, field)
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False, skip_blank_lines=False, engine="c", skiprows=skip)
    except pd.errors.EmptyDataError:
        raise ModelInputError(f"{field}: {p!r} is empty (no header line)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ModelInputError(f"{field}: {p!r} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    df.columns = [str(c).strip() for c in df.columns]
    df.attrs["first_data_line"] = skip + 2  # 1-based line of the first data row
    return df


def first_line(df, idx) -> int | None:
    """1-based file line of positional row ``idx[0]`` (None if no bad rows)."""
    return int(idx[0]) + int(df.attrs.get("first_data_line", 2)) if len(idx) else None


def require_columns(df, columns: Sequence[str], *, option: dict[str, str] | None = None, path: str = "FILE") -> None:
    present = list(df.columns)
    for c in columns:
        if c not in present:
            opt = (option or {}).get(c)
            who = f"{opt} {c!r}" if opt else f"column {c!r}"
            raise ModelInputError(f"{who}: no such column in {path}; columns present: {', '.join(present) or '(none)'}")


def numeric_columns(df, columns: Sequence[str]):
    """(clean numeric frame, BadRows): rows with a blank/non-numeric value in ``columns`` are removed and counted."""
    import numpy as np
    import pandas as pd

    out = pd.DataFrame(index=df.index)
    bad = np.zeros(len(df), dtype=bool)
    for c in columns:
        if pd.api.types.is_float_dtype(df[c]) or pd.api.types.is_integer_dtype(df[c]):
            v = df[c].astype(float)
        else:
            v = pd.to_numeric(df[c].astype(str).str.strip(), errors="coerce")
        bad |= v.isna().to_numpy() | ~np.isfinite(v.fillna(0).to_numpy(dtype=float))
        out[c] = v
    idx = np.flatnonzero(bad)
    report = BadRows(int(idx.size), first_line(df, idx), tuple(columns))
    clean = out[~bad].astype(float)
    return clean, report


def _leading_comments(p: str, field: str) -> int:
    skip = 0
    try:
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.lstrip().startswith("#"):
                    break
                skip += 1
    except OSError as exc:
        raise ModelInputError(f"{field}: cannot read {p!r}: {exc.strerror}") from None
    return skip


def read_numeric(path, required: Sequence[str], *, option: dict[str, str] | None = None, field: str = "FILE"):
    """Only the ``required`` columns, as floats; bad rows counted (fast path: pandas' C float parser)."""
    import pandas as pd

    p = os.fspath(path)
    if not os.path.isfile(p):
        raise ModelInputError(f"{field}: no such file {p!r}")
    skip = _leading_comments(p, field)
    try:
        head = pd.read_csv(p, nrows=0, skiprows=skip)
    except pd.errors.EmptyDataError:
        raise ModelInputError(f"{field}: {p!r} is empty (no header line)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ModelInputError(f"{field}: {p!r} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    head.columns = [str(c).strip() for c in head.columns]
    require_columns(head, required, option=option, path=p)
    names = list(head.columns)
    try:
        # every column is parsed (no usecols: with it pandas silently truncates a row with more
        # fields than the header); index_col=False so a ragged row is an error, not an index
        df = pd.read_csv(p, skiprows=skip + 1, header=None, names=names, index_col=False,
                         skip_blank_lines=False, engine="c", keep_default_na=False, na_values=[""],
                         dtype={c: str for c in names if c not in required})[list(dict.fromkeys(required))]
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise ModelInputError(f"{field}: {p!r} is not a readable CSV: {str(exc).splitlines()[0]}") from None
    df.attrs["first_data_line"] = skip + 2
    clean, report = numeric_columns(df, required)
    big = (clean.abs() > MAX_ABS).to_numpy()
    if big.any():
        r, c = (int(v[0]) for v in big.nonzero())
        line = first_line(df, [clean.index[r]])
        raise ModelInputError(f"{field}: {p} line {line}: column {required[c]!r}: {clean.iat[r, c]:g} is out of range "
                              f"(|value| <= {MAX_ABS:g}; no measured size, time or rate comes near it)")
    if clean.empty:
        raise ModelInputError(
            f"{field}: {os.fspath(path)} has no usable rows ({report.count} row(s) with missing or non-numeric "
            f"values in {', '.join(required)}, first at line {report.first_line})"
        )
    return clean, report
