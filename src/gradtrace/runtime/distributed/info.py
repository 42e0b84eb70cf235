"""Who this process is under a distributed launcher, read from the launcher's environment.

Torch-free; every module of :mod:`gradtrace.runtime.distributed` and the integrations read it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gradtrace.env import CHECK_SYNC


@dataclass(frozen=True)
class RankInfo:
    """Who this process is under a distributed launcher (from RANK/WORLD_SIZE/LOCAL_RANK)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        """True when launched as one of several ranks."""
        return self.world_size > 1

    @property
    def is_zero(self) -> bool:
        """True on the rank that prints the merged report."""
        return self.rank == 0


def _env_int(environ: Any, name: str, default: int) -> int:
    try:
        return int(str(environ.get(name, "")).strip() or default)
    except ValueError:
        return default


def rank_info(environ: Any = None) -> RankInfo:
    """This process's rank from the launcher's environment (torchrun, mp.spawn scripts, slurm).

    Malformed values count as a single process: gradtrace never fails because of them.
    """
    env = os.environ if environ is None else environ
    world = _env_int(env, "WORLD_SIZE", 1)
    rank = _env_int(env, "RANK", 0)
    if world < 1 or not 0 <= rank < world:
        return RankInfo()
    return RankInfo(rank, world, _env_int(env, "LOCAL_RANK", rank))


def check_sync_every(environ: Any = None) -> int:
    """N from ``GRADTRACE_CHECK_SYNC`` (0 = off)."""
    env = os.environ if environ is None else environ
    return max(0, _env_int(env, CHECK_SYNC, 0))
