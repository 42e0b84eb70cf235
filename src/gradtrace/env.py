"""Every ``GRADTRACE_*`` environment switch, read in one place (the README lists them).

# NOTE [environment switches]
An on/off switch is off when unset or when its value is empty, ``0``, ``false``, ``no`` or
``off`` (any case, spaces ignored), and on for any other value. Valued settings (a folder, a
number) are read as text here and parsed by their one user.
"""
from __future__ import annotations

import os
from typing import Mapping

STRICT = "GRADTRACE_STRICT"  # internal errors raise instead of being logged (for tests)
NO_CACHE = "GRADTRACE_NO_CACHE"  # `gradtrace check` neither reads nor writes its cache
CACHE_DIR = "GRADTRACE_CACHE_DIR"  # where `gradtrace check` keeps its cache
CHECK_SYNC = "GRADTRACE_CHECK_SYNC"  # under torchrun: compare gradients every N steps
GATHER_TIMEOUT = "GRADTRACE_GATHER_TIMEOUT"  # under torchrun: seconds to wait for the ranks
DDP_DIR = "GRADTRACE_DDP_DIR"  # under torchrun: where the ranks' reports are exchanged

OFF = frozenset({"", "0", "false", "no", "off"})


def is_on(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the switch ``name`` is on (NOTE [environment switches])."""
    env = os.environ if environ is None else environ
    return env.get(name, "").strip().lower() not in OFF


def value(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The text of a valued setting, stripped ('' when unset)."""
    env = os.environ if environ is None else environ
    return env.get(name, "").strip()


def strict() -> bool:
    """``GRADTRACE_STRICT``: gradtrace's own errors raise (tests) instead of being logged."""
    return is_on(STRICT)
