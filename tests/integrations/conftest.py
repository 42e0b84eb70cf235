"""Marker of the slow tests here: ``-m "not ddp"`` leaves out the 2-process DDP runs."""
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ddp: 2 ranks on gloo, forked from the rank server "
                                       "(tests/conftest.py `forked`)")
