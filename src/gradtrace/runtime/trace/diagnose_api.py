"""Analyzers for misuses of autograd's API, named in the message torch raises: a custom Function's
backward returning the wrong number of gradients, an autograd.grad input that the outputs do not
use, requires_grad set on an integer or a computed tensor. :mod:`diagnose` dispatches to them."""
from __future__ import annotations

import inspect
import re
from typing import Any

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.catalogue import ErrorPattern
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.graph_walk import roots_of as _roots
from gradtrace.runtime.trace.records import created_site
from gradtrace.runtime.trace.state import TraceState

Tensor = torch.Tensor


def _function_count(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                    kwargs: dict, site: Site | None, state: TraceState) -> list[Finding]:
    m = re.search(r"function (\w+) returned an incorrect number of gradients \(expected (\d+), "
                  r"got (\d+)\)", str(exc))
    if m is None:
        return []
    queue = [r.grad_fn for r in _roots(args, kwargs) if r.grad_fn is not None]
    seen: dict[int, Any] = {}
    while queue and len(seen) < 5000:
        node = queue.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        cls = getattr(node, "_forward_cls", None)
        if type(node).__name__ == m[1] and cls is not None:
            try:
                lines, start = inspect.getsourcelines(cls.backward)
                line = _return_line(lines, int(m[3])) or next(
                    (i for i, t in enumerate(lines) if t.lstrip().startswith("def ")), 0)
                where = Site(inspect.getsourcefile(cls.backward) or "", start + line, "backward")
            except (OSError, TypeError):
                break
            return [make(code_for("function-grad-count", pat.code), where,
                         f"{cls.__name__}.backward returns {m[3]} gradient(s) "
                         f"but forward takes {m[2]} input(s)", fix="return one gradient per "
                         "forward input, None for inputs that need none",
                         related=[(site, "backward() failed here")])]
        queue.extend(n for n, _ in node.next_functions if n is not None)
    return []


def _return_line(lines: list[str], got: int) -> int | None:
    """0-based offset of the ``return`` in backward's source that returns ``got`` values (the
    only return, or the first one of that length); None when it cannot be told."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
              None)
    if fn is None:
        return None
    from gradtrace.runtime.trace.locate import own_returns
    returns = own_returns(fn)
    count = [r for r in returns if r.value is not None and
             (len(r.value.elts) if isinstance(r.value, ast.Tuple) else 1) == got]
    pick = count if count else returns if len(returns) == 1 else []
    return min(r.lineno for r in pick) - 1 if pick else None


def _unused_input(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple, kwargs: dict,
                  site: Site | None, state: TraceState) -> list[Finding]:
    m = re.search(r"at index (\d+)", str(exc))
    inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs or ())
    idx = int(m[1]) if m else None
    t = inputs[idx] if idx is not None and idx < len(inputs) else None
    cut = state.cut_of(t) if t is not None else None
    which = f"input {idx}" if idx is not None else "one of the inputs"
    related = [(cut.site, f"it left the graph here: {cut.describe()}")] if cut else []
    from gradtrace.runtime.trace.ignored_arg import ignoring_callee

    if cut is None and t is not None and (found := ignoring_callee(site, t)) is not None:
        line, call, name, param = found  # NOTE [argument the callee ignores]
        return [make(code_for("grad-input-unused", pat.code), line,
                     f"`{name}` is handed, in its parameter `{param}`, a value computed from "
                     f"{which} of autograd.grad ({src(site)}) and never reads it: what it "
                     "returns does not depend on that input",
                     fix=f"compute the result from `{param}`", related=[
                         (call, f"`{name}` is handed the value here"),
                         (site, "autograd.grad was asked for the input here")])]
    return [make(code_for("grad-input-unused", pat.code), site,
                 f"{which} of autograd.grad is not used to compute the outputs",
                 fix="pass the tensor actually used in the computation, or allow_unused=True",
                 related=related)]


def _first_tensor(args: tuple, kwargs: dict) -> Tensor | None:
    return next((a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)), None)

def _requires_grad_dtype(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                         kwargs: dict, site: Site | None, state: TraceState) -> list[Finding]:
    t = _first_tensor(args, kwargs)
    dtype = str(t.dtype).replace("torch.", "") if t is not None else "integer"
    cut = state.cut_of(t)
    related = [(cut.site, f"it was made here: {cut.describe()}")] if cut is not None else []
    return [make(code_for("requires-grad-on-integer", pat.code), site,
                 f"requires_grad is set on a {dtype} tensor ({src(site)}); only floating point "
                 "tensors can require gradients", fix=pat.fix, related=related)]


def _requires_grad_non_leaf(pat: ErrorPattern, exc: BaseException, func: Any, args: tuple,
                            kwargs: dict, site: Site | None, state: TraceState) -> list[Finding]:
    """The flag set on a computed tensor. When the name held a leaf on an earlier pass of the
    same loop and a later line of the loop rebound it to a computed value, that line leads."""
    from gradtrace.runtime.trace.locate import enclosing_loop

    t = _first_tensor(args, kwargs)
    made = created_site(t.grad_fn)[0] if t is not None else None
    node = type(t.grad_fn).__name__ if t is not None else "an op"
    if made is not None and site is not None and made.path == site.path \
            and made.line > site.line:
        loop = enclosing_loop(site)
        if loop is not None and loop.lineno < made.line <= (loop.end_lineno or 0):
            return [make(code_for("requires-grad-on-non-leaf", pat.code), made,
                         f"this line rebinds the tensor to a computed value ({node}) that the "
                         f"next pass of the loop then treats as a leaf ({src(site)})",
                         fix="start each pass from a new leaf: x = x.detach() here, or "
                             "x = x.detach().requires_grad_() before using it",
                         related=[(site, "requires_grad is set on it here")])]
    related = [(made, f"it was computed here ({node})")] if made is not None else []
    return [make(code_for("requires-grad-on-non-leaf", pat.code), site,
                 f"requires_grad is changed on a computed (non-leaf) tensor ({node}) here",
                 fix=pat.fix, related=related)]
