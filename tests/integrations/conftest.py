"""Marker of the slow tests here: ``-m "not ddp"`` leaves out the 2-process DDP runs."""
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ddp: starts 2 processes on gloo (slow, ~10-20 s CPU)")
