"""GT226: a tensor the optimizer trains is read only through a function that computes with grad
off, so it never gets a gradient.

# NOTE [optimized through a grad-off helper]
``emb = nn.Parameter(...)``; ``opt = Adam([emb] + lora_params)``; in the loop ``cond =
pipe.encode(emb)`` where ``encode`` is decorated with ``@torch.no_grad()`` (or computes every
result inside ``with torch.no_grad():``, NOTE [grad-off returns]): grad mode is global state,
so what ``encode`` returns has no history, whatever its arguments. When every read of the
trained tensor is an argument of such a call (the optimizer's list, ``.grad``/``.data``/
``.item()`` reads and printing aside), no path leads from the loss back to it: ``emb.grad``
stays ``None`` and the optimizer never moves it. Backward still runs when the loss reaches
other trained weights (a LoRA, a head), so nothing says so (DeepFloyd IF's ``encode_prompt``,
prompt-embedding optimisation through pipelines decorated with ``@torch.no_grad()``). The
finding names the decorator or the ``with`` of the helper: the line to change.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.cut_inputs import bound_param, cut_param
from gradtrace.lint.analysis.grad_off_returns import grad_off_cut
from gradtrace.lint.analysis.reach import called_function
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import OPTIMIZER, PARAMETER, Scope
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, scope_nodes, walk
from gradtrace.lint.rule import Bad, Good, Rule

# reads of a tensor that lead no gradient anywhere (logging, inspection)
INSPECT_ATTRS = frozenset({"grad", "data", "item", "detach", "shape", "dtype", "device",
                           "requires_grad", "norm", "numel", "size", "tolist", "cpu"})
LOG_CALLS = frozenset({"print", "len", "repr", "str", "float", "isinstance"})
MAX_HOPS = 2  # local names followed from the trained tensor (``adv = x + delta``)


class OptimizedTensorReadUnderNoGrad(Rule):
    """A tensor given to an optimizer is read only as the argument of a function that
    computes everything it returns with grad off (`@torch.no_grad()`).

    Why: grad mode is global state, so what a `@torch.no_grad()` function (or one that
    returns only values computed in a `with torch.no_grad():` block) returns has no history,
    whatever its arguments. A trained tensor (an `nn.Parameter`, a `requires_grad=True`
    tensor in the optimizer's list) read only through such calls has no path from the loss:
    its `.grad` stays `None` and the optimizer never moves it, silently when the loss also
    reaches other trained weights (a LoRA, a head) so that `backward()` runs
    (pytorch-facts.md#partly-cut-graph; DeepFloyd IF's `@torch.no_grad()` `encode_prompt`
    used to optimise prompt embeddings, checked on torch 2.13). Take the decorator off (or
    compute the result outside the block) for the training path.
    Known limits: the tensor is a local name (of a function or the script) bound to
    `nn.Parameter(...)` or a factory with `requires_grad=True`, listed by name in an
    optimizer built in the same scope, which also runs `backward()`; the helper is a
    function or method of the file (NOTE [grad-off returns]), or one call further: a function
    of the file, a module's `forward` run through an instance (`model(adv)`), that hands the
    argument only to such a helper and returns nothing else computed from it
    (NOTE [cut inputs]); the tensor may first go through arithmetic bound to a local name
    (`adv = images + delta`) every read of which is such a call; any other read of the
    tensor (another op, a call of another function) leaves the file alone.
    """

    code = "GT226"
    needs_step = True  # NOTE [step files]
    name = "optimized-tensor-read-under-no-grad"
    message = ("`{param}` is trained by `{opt}` but read only through `{helper}`, which "
               "computes what it returns under `{mode}`: no gradient reaches `{param}`, and "
               "the optimizer never moves it")
    triggers = ("no_grad", "inference_mode", "set_grad_enabled")
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            @torch.no_grad()
            def encode(table, ids):
                return table[ids] * 2.0

            head = nn.Linear(4, 1)
            emb = nn.Parameter(torch.randn(10, 4))
            opt = torch.optim.Adam([emb, *head.parameters()])
            for ids in [torch.tensor([1, 2]), torch.tensor([3])]:
                loss = head(encode(emb, ids)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            """, at=(4, 1)),
        Good("""
            import torch
            import torch.nn as nn

            def encode(table, ids):
                return table[ids] * 2.0

            head = nn.Linear(4, 1)
            emb = nn.Parameter(torch.randn(10, 4))
            opt = torch.optim.Adam([emb, *head.parameters()])
            for ids in [torch.tensor([1, 2]), torch.tensor([3])]:
                loss = head(encode(emb, ids)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions(".backward(") or not (
                ctx.mentions("Parameter(") or ctx.mentions("requires_grad=True")):
            return
        fns = of_types(node, FUNCTION_TYPES)  # walk's functions in walk's order, one walk
        offs = {id(f): cut for f in fns if (cut := _off_cut(f, ctx)) is not None}
        if not offs:
            return
        for fn in (node, *fns):
            if id(fn) in offs or fn is not node and not _may_backward(fn, ctx) \
                    or not step_calls(ctx, fn).losses():
                continue
            yield from self._scope(fn, ctx, offs)
        for info in ctx.analysis.classes.values():
            if not info.is_module:  # a module's own Parameters: GT117
                yield from self._attrs(info.node, ctx, offs)

    def _attrs(self, cls: ast.ClassDef, ctx: Context, offs: dict) -> Iterator[Finding]:  # type: ignore[type-arg]
        """``self.emb = nn.Parameter(...)`` and ``self.opt = Adam([self.emb])`` in a plain
        class, every read of ``self.emb`` in its methods through a grad-off helper."""
        methods = [m for m in cls.body if isinstance(m, FUNCTION_TYPES)]
        if not any(step_calls(ctx, m).losses() for m in methods):
            return
        made: dict[str, ast.stmt] = {}
        opts: list[tuple[ast.stmt, str, ast.AST]] = []
        for m in methods:
            for st in ctx.scope(m).stmts:
                if not (isinstance(st, ast.Assign) and len(st.targets) == 1
                        and (t := dotted(st.targets[0])) and t.startswith("self.")):
                    continue
                if _trained(st.value, PARAMETER if _param_call(st.value, ctx) else None):
                    made[t] = st
                elif isinstance(st.value, ast.Call) and (
                        ctx.qualified_name(st.value.func) or "").startswith("torch.optim."):
                    opts.append((st, t, m))
        for name, st in made.items():
            opt = next(((o, t) for o, t, _ in opts if any(
                dotted(x) == name for x in walk(o.value))), None)  # type: ignore[union-attr]
            if opt is None or any(x is not st and name in {dotted(y) for y in
                                                         (x.targets if isinstance(x, ast.Assign)
                                                          else [])}
                                  for m in methods for x in ctx.scope(m).stmts):
                continue
            found = None
            for m in methods:
                got = _only_cut_reads(name, m, ctx.scope(m), opt[0], offs, skip=st)
                if got is False:
                    found = None
                    break
                found = found or got
            if found:
                yield self._report(found, name, opt[0], opt[1], ctx)

    def _scope(self, fn: ast.AST, ctx: Context, offs: dict) -> Iterator[Finding]:  # type: ignore[type-arg]
        """NOTE [optimized through a grad-off helper]"""
        scope = ctx.scope(fn)
        for name, opt, opt_name in _optimized(scope):
            got = _only_cut_reads(name, fn, scope, opt, offs)
            if not got:
                continue
            yield self._report(got, name, opt, opt_name, ctx)

    def _report(self, got, name: str, opt: ast.stmt, opt_name: str,  # type: ignore[no-untyped-def]
                ctx: Context) -> Finding:
        call, helper, cut, outer = got
        mode = ctx.source(cut.node)
        if ctx.line_text(cut.node.lineno).lstrip().startswith("@"):
            mode = "@" + mode
        through = f"`{helper.name}`" if outer is None else \
            f"`{outer.name}`, which hands it on to `{helper.name}`"
        return self.report(cut.node, ctx, related=(
            Related(ctx.path, call.lineno, f"`{name}` reaches the loss only through this "
                    f"call of {through}", ctx.column(call)),
            Related(ctx.path, opt.lineno, f"`{opt_name}` trains `{name}`", ctx.column(opt))),
            param=name, opt=opt_name, helper=helper.name, mode=mode)


def _may_backward(fn: ast.AST, ctx: Context) -> bool:
    """A call under ``fn`` may run a backward that fills ``.grad`` (``x.backward()``,
    ``self.manual_backward(x)``, ``backward(x)`` imported from ``torch.autograd``): without
    one, ``step_calls(ctx, fn).losses()`` is empty (:func:`backward_of` recognises no other
    call), and the function's calls are not classified for nothing."""
    for c in of_types(fn, (ast.Call,)):
        f = c.func  # type: ignore[attr-defined]
        if f.__class__ is ast.Attribute:
            if f.attr in ("backward", "manual_backward"):
                return True
        elif f.__class__ is ast.Name and ctx.qualified_name(f) == "torch.autograd.backward":
            return True
    return False


def _off_cut(fn: ast.AST, ctx: Context):  # type: ignore[no-untyped-def]
    start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])  # type: ignore[attr-defined]
    code = "\n".join(ctx.code_lines[start - 1:fn.end_lineno])  # type: ignore[attr-defined]
    if not any(w in code for w in ("no_grad", "inference_mode", "set_grad_enabled")) \
            or ".backward(" in code:
        return None
    return grad_off_cut(ctx, fn)  # type: ignore[arg-type]


def _trained(b_value: ast.expr | None, kind: str | None) -> bool:
    """An ``nn.Parameter(...)``, or a factory call with ``requires_grad=True``."""
    if kind == PARAMETER:
        return True
    return isinstance(b_value, ast.Call) and any(
        k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in b_value.keywords)


def _optimized(scope: Scope) -> Iterator[tuple[str, ast.stmt, str]]:
    """(trained name, the optimizer's statement, the optimizer) for each local trained tensor
    listed by name in the arguments of an optimizer built in the scope."""
    opts = [(n, b) for n, bs in scope.bindings.items() for b in bs if b.kind == OPTIMIZER
            and isinstance(b.value, ast.Call)]
    if not opts:
        return
    for name, bs in scope.bindings.items():
        if "." in name or len(bs) != 1 or not _trained(bs[0].value, bs[0].kind):
            continue
        for opt_name, ob in opts:
            if ob.line > bs[0].line and any(
                    isinstance(x, ast.Name) and x.id == name for a in
                    (*ob.value.args, *(k.value for k in ob.value.keywords))  # type: ignore
                    for x in walk(a)):
                yield name, ob.stmt, opt_name
                break


def _param_call(v: ast.expr | None, ctx: Context) -> bool:
    return isinstance(v, ast.Call) and ctx.qualified_name(v.func) == "torch.nn.Parameter"


def _only_cut_reads(name: str, fn: ast.AST, scope: Scope, opt: ast.stmt, offs: dict,
                    skip: ast.stmt | None = None, depth: int = 0
                    ):  # type: ignore[no-untyped-def, type-arg]
    """(a call, the helper, its cut, the call that cuts it when the helper is one call further)
    when every read of ``name`` (a name or ``self.x``) outside the optimizer's statement (and
    ``skip``), inspection and printing is an argument of a call of a grad-off helper, or of a
    function of the file that cuts that argument from what it returns (NOTE [cut inputs]), or
    is in the arithmetic bound to a local name every read of which is such
    (``adv = inputs + delta``; ``model(adv)``), :data:`MAX_HOPS` names deep; None when there
    is no read, False at a live read."""
    parents: dict[int, ast.AST] = {}
    for n in scope_nodes(fn):
        for c in ast.iter_child_nodes(n):
            parents[id(c)] = n
    inside_opt = {id(x) for x in walk(opt)} | ({id(x) for x in walk(skip)} if skip else set())
    found = None
    for n in scope_nodes(fn):
        if not (isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == name
                and isinstance(n.ctx, ast.Load)) or id(n) in inside_opt:
            continue
        up = parents.get(id(n))
        if isinstance(up, ast.Attribute) and up.attr in INSPECT_ATTRS or isinstance(up, ast.Return):
            continue  # inspected, or handed back once trained: no path to this scope's loss
        if isinstance(up, ast.keyword):
            up = parents.get(id(up))
        if isinstance(up, ast.Call) and n is not up.func:
            if dotted(up.func) in LOG_CALLS:
                continue
            helper = called_function(up, scope, up.lineno)
            cut = offs.get(id(helper)) if helper is not None else None
            if cut is not None:
                found = found or (up, helper, cut, None)
                continue
            param = bound_param(helper, up, n) if isinstance(helper, FUNCTION_TYPES) else None
            inner = cut_param(scope.ctx, helper, param) if param else None  # type: ignore[arg-type]
            if inner is not None:
                found = found or (up, inner[1], inner[0], helper)
                continue
        while isinstance(up, (ast.BinOp, ast.UnaryOp)):
            up = parents.get(id(up))
        if isinstance(up, ast.Return) and up is not parents.get(id(n)):
            continue  # `return inputs + delta`: handed back once trained
        if isinstance(up, ast.Assign) and len(up.targets) == 1 and isinstance(
                up.targets[0], ast.Name) and up.targets[0].id != name and depth < MAX_HOPS \
                and up.value is not n:
            sub = _only_cut_reads(up.targets[0].id, fn, scope, opt, offs, skip, depth + 1)
            if sub is False:
                return False
            found = found or sub
            continue
        return False  # a live read: the tensor may get a gradient there
    if found and _closure_reads(fn, name):
        return False  # read in a nested function or lambda too (a closure): not followed
    return found


def _closure_reads(fn: ast.AST, name: str) -> bool:
    """A function or lambda nested in ``fn`` reads ``name`` from ``fn`` (its root is not one
    of its own parameters)."""
    root = name.partition(".")[0]
    for d in walk(fn):
        if d is fn or not isinstance(d, (*FUNCTION_TYPES, ast.Lambda)):
            continue
        a = d.args  # type: ignore[attr-defined]
        if root in {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}:
            continue
        if any(isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == name for n in walk(d)):
            return True
    return False
