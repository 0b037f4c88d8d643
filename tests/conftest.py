"""Shared fixtures: every test writes to its own temporary store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def cat():
    """The default hardware catalog (hwmodels.catalog), shared by the predictor tests."""
    from hwmodels.catalog import default_catalog

    return default_catalog()


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path_factory, monkeypatch):
    store = tmp_path_factory.mktemp("store")
    monkeypatch.setenv("HWEVAL_STORE", str(store))
    yield store


@pytest.fixture
def store_path(_isolated_store) -> Path:
    return _isolated_store


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300, cwd: Path | None = None):
    """Run ``python -m hweval ARGS`` in a subprocess; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "hweval", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(cwd or REPO),
    )


@pytest.fixture
def cli():
    return run_cli
