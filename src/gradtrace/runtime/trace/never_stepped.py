"""An optimizer whose gradients are cleared pass after pass and never applied.

# NOTE [optimizer cleared, never stepped]
A bilevel search keeps one optimizer per level for the architecture weights; the step zeroes
each level's optimizer, backpropagates the validation loss and moves on to the weight step,
never calling that optimizer's ``step()``: the weights it holds get gradients every batch and
never change. The run sees it from four facts together:

- an optimizer built while tracing (``opt_built``) never stepped, while another one stepped at
  least twice (the program trains; a second phase never reached builds no such pair);
- none of its tensors is held by an optimizer that stepped (a spare optimizer over the same
  weights is harmless), and some of them require grad and received a gradient;
- its tensors' gradients were cleared at least twice: seen as discards (cleared after a
  backward() with no step between, NOTE [discarded gradients] in :mod:`.loop_order`) or by
  watching one of its tensors from the first checked step on
  (NOTE [clear on some passes only]'s watch in :mod:`.extra_step`), one count per checked
  step that finds it cleared since the last; and one of the clearing lines calls
  ``zero_grad()`` on the name the optimizer was bound to where it was built
  (``alpha_optim = [...]`` ... ``alpha_optim[level].zero_grad()``: its own clear, not a
  model's ``zero_grad()`` that also clears the tensors of an optimizer kept for a later
  phase). The program treats that optimizer as one that trains;
- no crash cut the run short before the steps (:func:`.silent._cut_first_pass`'s reading).

The line is the first ``backward()`` after that clearing line in the same loop of the same
function (where ``step()`` belongs), else the clearing line. Optimizers built on one line
(a list of per-level optimizers) are one finding.
"""
from __future__ import annotations

import ast
from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_loop, tree_of
from gradtrace.runtime.trace.opt_state import built_site

CODE = "GT869"
_KEY = "unstepped"  # data.__dict__ key: id(optimizer) -> [built at, kind, ids, ...]


def _root(expr: ast.AST) -> str:
    """``alpha_optim[level]`` -> ``alpha_optim``; ``self.opt_d`` -> ``self.opt_d``."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        head = _root(expr.value)
        return f"{head}.{expr.attr}" if head else ""
    return ""


def _cleared_through(built: Site | None, clear: Site) -> bool:
    """Whether the line ``clear`` calls ``zero_grad()`` on the name the optimizer built at
    ``built`` was bound to (``opts = [Adam(...) ...]`` ... ``opts[i].zero_grad()``): its own
    clear, not a model's ``zero_grad()`` that also clears tensors it holds."""
    if built is None:
        return False
    names: set[str] = set()
    for node in ast.walk(tree_of(built.path) or ast.Module(body=[], type_ignores=[])):
        if isinstance(node, ast.Assign) and node.lineno <= built.line <= (node.end_lineno or 0):
            names.update(_root(t) for t in node.targets)
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "zero_grad" and n.lineno == clear.line
               and _root(n.func.value) in names - {""}
               for n in ast.walk(tree_of(clear.path) or ast.Module(body=[], type_ignores=[])))


def _after_clear(state: Any, clear: Site) -> Site:
    """The first backward() line after ``clear`` in its function and loop, else ``clear``."""
    loop = enclosing_loop(clear)
    later = [s for s in state.backward_sites if s.path == clear.path and s.function ==
             clear.function and s.line > clear.line and enclosing_loop(s) is loop]
    return min(later, key=lambda s: s.line) if later else clear


def note_unstepped(data: Any, state: Any, rec: Any) -> None:
    """At a checked step of an optimizer that stepped twice or more: remember each optimizer
    built that has not stepped, holds nothing a stepping optimizer holds and has a gradient
    on some tensor (plain values: the optimizers may die with the function that built them),
    and watch one of its tensors for clears
    (NOTE [clear on some passes only]'s watch: one line recorded per clear); count the checks that found it cleared since the last one."""
    if rec.steps < 2:
        return
    seen = data.__dict__.setdefault(_KEY, {})
    for entry in seen.values():  # [built, kind, ids, watched id, clears, first clear line]
        site = state.clear_sites.pop(entry[3], None)
        if site is not None:
            entry[4] += 1
            entry[5] = entry[5] or site
    stepped = [r.ref() for r in list(data.optimizers.values()) if r.steps]
    held = {id(p) for o in stepped if o is not None for g in o.param_groups for p in g["params"]}
    for event in list(data.opt_built.values()):
        opt = event.ref()
        if opt is None or id(opt) in seen or _stepped(data, opt) or len(seen) >= 64:
            continue
        params = [p for g in opt.param_groups for p in g["params"]]
        rep = next((p for p in params if p.requires_grad and p.grad is not None), None)
        if rep is None or any(id(p) in held for p in params) or len(state.clear_watch) >= 512:
            continue
        seen[id(opt)] = [built_site(event), type(opt).__name__,
                         frozenset(id(p) for p in params), id(rep), 0, None]
        state.clear_watch[id(rep)] = state.clear_watch[id(rep.grad)] = id(rep)


def _stepped(data: Any, opt: Any) -> bool:
    rec = data.optimizers.get(id(opt))
    return rec is not None and rec.steps > 0


def never_stepped_findings(state: Any, data: Any) -> list[Finding]:
    """NOTE [optimizer cleared, never stepped]."""
    seen = data.__dict__.get(_KEY)
    if not seen or state.crash_findings:
        return []
    groups: dict[Site | None, list[list[Any]]] = {}
    for key, entry in seen.items():
        if not data.optimizers.get(key) or not data.optimizers[key].steps:
            groups.setdefault(entry[0], []).append(entry)
    out = []
    for built, opts in groups.items():
        ids = frozenset().union(*(e[2] for e in opts))
        clears = [d[0] for d in state.discards if d[0] is not None and d[3] & ids]
        clears += [e[5] for e in opts if e[4]]
        if len(clears) + sum(max(e[4] - 1, 0) for e in opts) < 2 or \
                not any(_cleared_through(built, c) for c in clears):
            continue
        site = _after_clear(state, clears[0])
        kind = opts[0][1]
        many = f"the {len(opts)} {kind} optimizers" if len(opts) > 1 else f"the {kind} optimizer"
        related = [(clears[0], "its gradients are cleared here")] + \
            ([(built, "built here")] if built is not None else [])
        out.append(make(CODE, site, f"{many} built at line {built.line if built else '?'} "
                        f"never step: backward() fills their {len(ids)} tensor(s)' "
                        "gradients and zero_grad() clears them, pass after pass, while "
                        "another optimizer steps, so those tensors never change",
                        fix="call step() on that optimizer after this backward()",
                        related=related, severity="warning"))
    return out
