"""Provenance and error helpers shared by the importers."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwcore.errors import InputError


@dataclass(frozen=True)
class Source:
    """One input file: where it was read from and the sha256 of its bytes."""

    path: str
    sha256: str
    text: str

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Source:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{p}: no such file")
        if p.is_dir():
            raise InputError(f"{p}: is a directory (give the log files themselves)")
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"{p}: cannot read: {exc.strerror}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data[: exc.start].count(b"\n") + 1
            raise InputError(f"{p}:{line}: not UTF-8 text (byte {exc.start})") from None
        return cls(path=str(p.resolve()), sha256=hashlib.sha256(data).hexdigest(), text=text)

    def provenance(self, importer: str, version: str, line: int | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"source_path": self.path, "source_sha256": self.sha256, "importer": importer,
                             "importer_version": version}
        if line is not None:
            d["source_line"] = line
        return d


def line_error(path: str, line: int, message: str) -> InputError:
    """``InputError("path:line: message")``: the one-line form every importer uses."""
    return InputError(f"{path}:{line}: {message}")
