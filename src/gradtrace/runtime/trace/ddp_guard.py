"""# NOTE [guard lets a frozen module into DDP]

``DistributedDataParallel(module)`` raises "DistributedDataParallel is not needed when a module
doesn't have any parameter that requires a gradient" when every parameter of ``module`` is
frozen. Wrappers that give each child its own DDP (MMCV/MMEditing's
``DistributedDataParallelWrapper``, "wrap every submodule that has weights" helpers) guard the
call with a test on the child's parameters (``next(m.parameters(), None) is None``, ``if
list(m.parameters())``, ``sum(p.numel() ...)``): a frozen child (a perceptual loss's VGG, a
teacher) has parameters, passes the guard and makes DDP raise. The fix is the guard (it must
ask ``requires_grad``), not the DDP call.

After the crash the run reads the innermost user frame of the traceback (the DDP call): when
that line lies in a branch of an ``if`` of the same function whose test lists a module's
parameters (a ``.parameters()``/``.named_parameters()`` call) and never reads
``requires_grad``, the finding names the test; otherwise the DDP call itself (the module given
to it is frozen as a whole). Kind ``ddp-wraps-frozen-module`` (static twin GT456).
"""
from __future__ import annotations

import ast
import types
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import function_at


def _lists_parameters(test: ast.expr) -> bool:
    calls = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("parameters", "named_parameters") for n in ast.walk(test))
    asks = any(isinstance(n, ast.Attribute) and n.attr == "requires_grad" or
               isinstance(n, ast.Constant) and n.value == "requires_grad" for n in ast.walk(test))
    return calls and not asks


def _within(stmts: list[ast.stmt], line: int) -> bool:
    return any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in stmts)


def guard_of(site: Site) -> Site | None:
    """The test of the innermost ``if`` around ``site`` (same function) that lists a module's
    parameters without asking ``requires_grad``."""
    got = function_at(site)
    if got is None:
        return None
    _, scope = got
    best: ast.If | None = None
    for node in ast.walk(scope):
        if isinstance(node, ast.If) and (_within(node.body, site.line) or
                                         _within(node.orelse, site.line)):
            if best is None or node.lineno > best.lineno:
                best = node
    if best is None or not _lists_parameters(best.test):
        return None
    return Site(site.path, best.test.lineno, site.function, best.test.col_offset)


def frozen_wrap(pat: ErrorPattern, exc: BaseException, frame: types.FrameType, site: Site,
                state: Any) -> list[Finding]:
    """The finding of NOTE [guard lets a frozen module into DDP]."""
    guard = guard_of(site)
    if guard is None:
        return [make(pat.finding_code, site,
                     f"DistributedDataParallel is given a module none of whose parameters "
                     f"requires grad ({src(site)}): DDP has nothing to all-reduce and refuses it",
                     fix=pat.fix)]
    return [make(pat.finding_code, guard,
                 "this test decides which modules get their own DistributedDataParallel by "
                 "whether they have parameters, not whether any of them requires grad: a "
                 f"frozen module passes it and DDP refuses it ({src(site)})",
                 fix="test `any(p.requires_grad for p in module.parameters())` and leave "
                     "frozen modules unwrapped",
                 related=[(site, "DistributedDataParallel raises here")])]


POSTHOC = {"ddp-frozen-module": frozen_wrap}
