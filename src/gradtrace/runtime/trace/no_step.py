"""A run whose optimizers never step, while backward() fills their gradients pass after pass.

# NOTE [no optimizer ever steps]
An optimizer is built over the weights, `backward()` runs again and again and fills their
`.grad`, and no `step()` ever runs: the weights end the run where they started and nothing
fails. Two real shapes: a learning-rate scheduler's `step()` called where the optimizer's
belongs (the scheduler only changes `lr`; pytorch#3814), and a step guarded by `(step + 1) %
accumulation == 0` with the counter restarting every epoch and fewer batches per epoch than
the accumulation period (the condition never holds; transformers#2995). The run sees: no
crash; at least three `backward()` calls; optimizers built while tracing, none of them (nor
any other) ever stepped; one of them holding a tensor that requires grad and has a gradient.
The program's file is read to name the line: the `if` whose test guards a `<name>.step()` of
the name the optimizer was bound to (the test never held), else a `step()` of another
receiver in the function of the last `backward()` (a schedule stepped in its place), else that
`backward()`. A file that reads some `.grad` (an update written by hand) is left alone.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_function, tree_of
from gradtrace.runtime.trace.never_stepped import _root
from gradtrace.runtime.trace.opt_state import built_site

CODE = "GT913"
MIN_BACKWARDS = 3


def no_step_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [no optimizer ever steps]."""
    if state.crash_findings or state.backward_count < MIN_BACKWARDS or data.steps \
            or not data.opt_built or not state.backward_sites \
            or any(r.steps for r in list(data.optimizers.values())):
        return []
    live, dead = [], []
    for event in list(data.opt_built.values()):
        opt = event.ref()
        if opt is None:
            dead.append(event)  # built in a function that has returned
        elif any(p.requires_grad and p.grad is not None
                 for g in opt.param_groups for p in g["params"]):
            live.append(event)
    back = state.backward_sites[-1]
    tree = tree_of(back.path)
    if tree is None or _reads_grad(tree) or not (live or dead):
        return []
    event = (live or dead)[0]
    built = built_site(event)
    names = _bound_names(built) if built is not None else set()
    if not live and (built is None or built.path != back.path or not _steps_named(tree, names)):
        return []  # a dead optimizer counts when its file steps it by name somewhere
    kind = event.kind.__name__
    where = f"built at line {built.line}" if built is not None else "built in this run"
    related = [(built, "built here")] if built is not None else []
    guard = _guard(tree, names) if built is not None and built.path == back.path else None
    if guard is not None:
        test, call = guard
        site = Site(back.path, test.lineno, back.function, test.col_offset)
        return [make(CODE, site, f"the {kind} optimizer {where} never steps: this condition "
                     f"guards its `{ast.unparse(call.func)}()` and never held in "
                     f"{state.backward_count} backward() calls, so the gradients pile up and "
                     "the weights never change",
                     fix="make the condition hold at least once per epoch (step on the last "
                     "batch too)", related=related + [(back, "backward() runs here")],
                     severity="warning")]
    fn = enclosing_function(tree, back.line)
    other = next((n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(
        n.func, ast.Attribute) and n.func.attr == "step" and _root(n.func.value) not in names
        and n.lineno > back.line), None)
    if other is not None:
        site = Site(back.path, other.lineno, back.function, other.col_offset)
        return [make(CODE, site, f"`{ast.unparse(other.func)}()` runs after every backward() "
                     f"but the {kind} optimizer {where} never steps ({state.backward_count} "
                     "backward() calls): the weights never change",
                     fix="call the optimizer's step() here (and step the scheduler after it)",
                     related=related + [(back, "backward() runs here")], severity="warning")]
    return [make(CODE, back, f"backward() ran {state.backward_count} times and filled the "
                 f"gradients of the {kind} optimizer {where}, which never stepped: the weights "
                 "never change", fix="call the optimizer's step() after this backward()",
                 related=related, severity="warning")]


def _bound_names(built: Site) -> set[str]:
    """The names the optimizer built on the line ``built`` was bound to."""
    tree = tree_of(built.path)
    names: set[str] = set()
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Assign) and node.lineno <= built.line <= (node.end_lineno or 0):
            names.update(_root(t) for t in node.targets)
    return names - {""}


def _guard(tree: ast.Module, names: set[str]) -> tuple[ast.expr, ast.Call] | None:
    """The test of the innermost ``if`` around a ``<name>.step()`` of ``names``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        for s in node.body:
            for n in ast.walk(s):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "step" and _root(n.func.value) in names \
                        and not any(isinstance(m, ast.If) and m is not node and _holds(m, n)
                                    for m in ast.walk(s)):
                    return node.test, n
    return None


def _steps_named(tree: ast.Module, names: set[str]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "step" and _root(n.func.value) in names for n in ast.walk(tree))


def _holds(outer: ast.AST, inner: ast.AST) -> bool:
    return any(n is inner for n in ast.walk(outer))


def _reads_grad(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "grad" and isinstance(n.ctx, ast.Load)
               for n in ast.walk(tree))
