"""Shared fixtures: repository paths, a fast test task, and a guard that nothing is left running."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SMALL_GEMM = REPO / "tests" / "data" / "small_gemm"


@pytest.fixture
def small_task(tmp_path: Path) -> Path:
    """A private copy of the fast gemm task that a test may modify."""
    dst = tmp_path / "small_gemm"
    shutil.copytree(SMALL_GEMM, dst)
    return dst


def needs(*tools: str) -> pytest.MarkDecorator:
    missing = [t for t in tools if shutil.which(t) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")
