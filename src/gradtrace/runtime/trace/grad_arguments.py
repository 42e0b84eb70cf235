"""A custom Function's ``backward`` that takes another number of gradients than its ``forward``
returns outputs: autograd calls ``backward(ctx, *grads)`` with one gradient per output, and
Python refuses the call (``F.backward() takes 2 positional arguments but 4 were given``) before
any line of ``backward`` runs, so the traceback ends in torch. The Function is found in the
graph of the failed backward by the qualified name the message gives; the finding (the static
rule's code, GT135) is at the ``def`` of its ``backward``. Called through
:data:`gradtrace.runtime.trace.diagnose._ANALYZERS`."""
from __future__ import annotations

import inspect
import re
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import roots_of
from gradtrace.runtime.trace.state import TraceState

_MESSAGE = re.compile(r"([\w.<>]+)\.backward\(\) (?:takes (\d+) positional arguments? but (\d+) "
                      r"were given|missing (\d+) required positional)")


def function_grad_arguments(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                            kwargs: dict, site: Site | None,
                            state: TraceState) -> list[Finding]:
    m = _MESSAGE.search(str(exc))
    if m is None:
        return []
    cls = _function_class(m[1] + ".backward", args, kwargs)
    if cls is None:
        return []
    try:
        lines, start = inspect.getsourcelines(cls.backward)
        path = inspect.getsourcefile(cls.backward) or ""
    except (OSError, TypeError):
        return []
    at = next((i for i, t in enumerate(lines) if t.lstrip().startswith("def ")), 0)
    params = inspect.signature(cls.backward).parameters
    takes = sum(1 for p in params.values() if p.kind in (
        p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)) - 1
    if m[2] is not None:
        outputs = int(m[3]) - 1
        what = f"autograd passed it {outputs} gradients, one per output of forward"
    else:
        what = f"forward has {int(m[4])} output(s) fewer than the gradients it takes"
    return [make(code_for("function-grad-arguments", pat.code), Site(path, start + at, "backward"),
                 f"{cls.__name__}.backward takes {takes} gradient(s) besides ctx, but {what}",
                 fix="take one gradient argument per forward output (outputs marked "
                     "non-differentiable included), or `*grads`",
                 related=[(site, "backward() failed here")])]


def _function_class(qualname: str, args: tuple, kwargs: dict) -> Any:
    """The Function class whose ``backward`` has ``qualname``, among the nodes of the graph
    behind the tensors the failed call was given."""
    queue = [r.grad_fn for r in roots_of(args, kwargs) if r.grad_fn is not None]
    seen: set[int] = set()
    while queue and len(seen) < 5000:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        cls = getattr(node, "_forward_cls", None)
        if cls is not None and getattr(getattr(cls, "backward", None), "__qualname__",
                                       None) == qualname:
            return cls
        queue.extend(n for n, _ in node.next_functions if n is not None)
    return None
