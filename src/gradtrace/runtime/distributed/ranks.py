"""gradtrace under ``torchrun``: one merged report for all ranks, DDP errors explained.

``torchrun --nproc-per-node=N -m gradtrace run train.py [args]`` traces every rank. Each rank
writes what it saw (its findings, its counters, the facts behind a DistributedDataParallel
error) into a small JSON file in a per-run temp directory; rank 0 waits for the others
(bounded), merges, prints ONE report saying which rank saw what, and writes ``--json-out``
once. Ranks other than 0 wait (bounded) until rank 0 is done, because torchrun kills the
remaining workers as soon as one exits with an error.

# NOTE [why files, not object collectives]
At exit the process group is usually destroyed already (``destroy_process_group()``), and
after a DDP error or a collective timeout a peer may be dead or stuck inside a collective:
``gather_object`` would then block for the group's timeout (30 minutes by default) and torchrun
would kill rank 0 before it prints. Files in a directory keyed by the torchrun agent (parent
pid), ``TORCHELASTIC_RUN_ID``, ``MASTER_PORT`` and the restart count never block, and also
work when the program never initialised a process group. Limit: all ranks of one report must
share a filesystem (one node, or a shared ``GRADTRACE_DDP_DIR``).

Options (environment, also for ``gradtrace run --check-sync N``):

- ``GRADTRACE_CHECK_SYNC=N``: every N optimizer steps, check that gradients are equal on all
  ranks (one flattened all_reduce of per-parameter checksums on a private gloo group).
- ``GRADTRACE_GATHER_TIMEOUT=S``: how long rank 0 waits for the other ranks (default 30 s,
  5 s after a crash) and the others wait for rank 0.
- ``GRADTRACE_DDP_DIR=DIR``: where the per-run directory is made (default: the temp dir).

This module is torch-free at import (its codes: :mod:`gradtrace.code_tables.distributed`).
"""
from __future__ import annotations

import logging
from typing import Any

from gradtrace.codes import name_of
from gradtrace.env import strict
from gradtrace.findings import Finding
from gradtrace.runtime.distributed.info import RankInfo, check_sync_every, rank_info

LOG = logging.getLogger(__name__)


def rank_session(tracer: Any, *, check_sync: int | None = None,
                 info: RankInfo | None = None, environ: Any = None) -> Any:
    """A context manager that adds the distributed checks to a :class:`Tracer` session.

    Use inside ``with gradtrace.trace() as tr:`` (``gradtrace run`` does this for you)::

        with gradtrace.trace() as tr, rank_session(tr, check_sync=100) as rs:
            train()
        findings = merge_ranks(tr.findings)   # on rank 0: every rank's findings, merged

    Outside a multi-rank launch it only diagnoses DDP errors (``rs.diagnose(exc)``).
    ``environ`` (default ``os.environ``) names the per-run directory the ranks meet in, for
    launchers whose ranks do not share a parent process (Lightning's DDP launcher).
    """
    from gradtrace.runtime.distributed.session import RankSession

    every = check_sync_every() if check_sync is None else max(0, int(check_sync))
    return RankSession(tracer, info or rank_info(), every, environ)


def diagnose_exception(exc: BaseException) -> list[Finding]:
    """Diagnose a DDP/collective error with the active rank session (``[]`` if none/unknown)."""
    from gradtrace.runtime.distributed.session import current_session

    sess = current_session()
    return sess.diagnose(exc) if sess is not None else []


def merge_ranks(findings: list[Finding], crash: BaseException | None = None) -> list[Finding]:
    """Exchange findings between ranks; rank 0 gets the merged list (which rank saw what).

    Without a multi-rank launch (or without a session) this returns ``findings`` plus any
    DDP diagnosis of this process. Blocks at most ``GRADTRACE_GATHER_TIMEOUT`` seconds.
    """
    from gradtrace.runtime.distributed.session import current_session

    sess = current_session()
    if sess is None:
        return list(findings)
    try:
        return sess.finish(findings, crash)
    except Exception:  # the merge must never hide the program's own outcome
        if strict():
            raise
        LOG.debug("gradtrace: merging ranks failed", exc_info=True)
        return list(findings)


def crash_explained() -> list[Finding]:
    """The merged findings of spawned ranks that explain the crash (NOTE [spawned ranks] in
    :mod:`gradtrace.runtime.distributed.spawn`); ``[]`` without them. Call after :func:`merge_ranks`."""
    from gradtrace.runtime.distributed.session import current_session

    sess = current_session()
    return list(sess.explained) if sess is not None else []


def should_print(info: RankInfo | None = None) -> bool:
    """Whether this process prints the report: rank 0, or any process outside a launch.

    A rank other than 0 prints its own report when rank 0 did not report in time.
    """
    from gradtrace.runtime.distributed.session import current_session

    sess = current_session()
    if sess is not None and sess.print_own:
        return True
    return (info or rank_info()).is_zero


_EXPLAIN: dict[str, tuple[str, str, str]] = {
    "unused": ("GT880", "DistributedDataParallel expected a gradient for every parameter it "
               "manages in the previous iteration, and some got none (not used in forward on "
               "that rank, used only under no_grad or after a .detach()/.item() cut, an output "
               "of forward() left out of the loss, or a branch taken only on some ranks). DDP "
               "notices it at the next forward. `gradtrace run` under torchrun names the "
               "parameters per rank and why each got no gradient.",
               "pass find_unused_parameters=True to DistributedDataParallel (static_graph=True "
               "when the same parameters are unused in every iteration), or fix the code so "
               "that every parameter reaches the loss on every rank"),
    "ready-twice": ("GT882", "A parameter's gradient hook fired twice in one backward: the same "
                    "parameters ran in several reentrant backward passes (e.g. one module "
                    "inside two torch.utils.checkpoint(..., use_reentrant=True) segments) or "
                    "were shared across concurrent forward/backward passes.",
                    "use checkpoint(..., use_reentrant=False), or static_graph=True if the "
                    "graph is the same in every iteration"),
    "timeout": ("GT885", "A collective waited for a rank that never joined it: the ranks are "
                "out of step (a rank skipped or added a backward/step/collective, or is stuck "
                "or much slower). `gradtrace run` under torchrun prints each rank's counters "
                "and where a stuck rank was.",
                "make every rank run the same sequence of collectives; skip steps on all ranks "
                "together"),
    "peer-closed": ("GT885", "A peer process exited or crashed while this rank was in a "
                    "collective; the peer's own error (or a rank finishing early) is the cause.",
                    "look at the first failing rank's error; make every rank run the same "
                    "number of steps"),
}


def explain_message(text: str) -> list[Finding]:
    """Findings for a DDP/collective error message alone (``[]`` if it is not one).

    Torch-free; used by ``gradtrace explain "<error text>"`` (:mod:`gradtrace.cli.explain`).
    """
    from gradtrace.findings import Fix
    from gradtrace.runtime.distributed.diagnose import INDICES_RE, error_kind

    kind = error_kind(text)
    if kind not in _EXPLAIN:
        return []
    code, why, fix = _EXPLAIN[kind]
    m = INDICES_RE.search(text)
    if m:
        why += f" Here: parameter indices {m.group(2).strip()} on rank {m.group(1)}."
    return [Finding(code=code, name=name_of(code), message=why,
                    path="<message>", line=1, severity="error", fix=Fix(fix, "unsafe"),
                    source="runtime")]
