"""GT146: a post-accumulate-grad hook that changes its argument as if it were the gradient."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.calls import call_sites, own_nodes
from gradtrace.lint.analysis.file_parents import enclosing_class
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._writes import own_statements

REGISTER = "register_post_accumulate_grad_hook"
# torch.distributed collectives that write their first tensor argument in place
COLLECTIVES = frozenset("torch.distributed." + n for n in (
    "all_reduce", "reduce", "broadcast", "all_reduce_coalesced"))
# in-place methods that do not change the tensor's values
NOT_VALUES = frozenset({"requires_grad_", "share_memory_", "retain_grad_"})

Hook = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


def _hook_of(ctx: Context, call: ast.Call) -> tuple[Hook, str] | None:
    """The function ``call`` registers and the name its parameter has inside it."""
    if len(call.args) != 1 or call.keywords:
        return None
    h, bound = call.args[0], 0
    if isinstance(h, ast.Call) and (ctx.qualified_name(h.func) or "") == "functools.partial" \
            and h.args and not h.keywords:
        h, bound = h.args[0], len(h.args) - 1
    fn: Hook | None = None
    skip = 0
    if isinstance(h, ast.Lambda):
        fn = h
    elif isinstance(h, ast.Name):
        fn = ctx.analysis.functions.get(h.id)
    elif isinstance(h, ast.Attribute) and isinstance(h.value, ast.Name) and h.value.id == "self":
        cls = enclosing_class(ctx, call)
        info = ctx.analysis.classes.get(cls.name) if cls is not None else None
        fn = info.methods.get(h.attr) if info is not None and info.node is cls else None
        skip = 1
        if fn is not None and any(isinstance(d, ast.Name) and d.id == "staticmethod"
                                  for d in fn.decorator_list):
            skip = 0
    if fn is None:
        return None
    a = fn.args
    pos = [x.arg for x in (*a.posonlyargs, *a.args)][skip + bound:]
    if len(pos) != 1 or a.vararg is not None:
        return None
    return fn, pos[0]


def _first_write(ctx: Context, fn: Hook, name: str) -> ast.AST | None:
    """The first statement (or lambda body) of ``fn`` that changes the values of ``name``
    itself (not its ``.grad``): ``name /= n``, ``name[i] = v``, ``name.mul_(s)``,
    ``dist.all_reduce(name)``. None when ``name`` is rebound anywhere in ``fn``."""
    stmts = [fn.body] if isinstance(fn, ast.Lambda) else \
        sorted(own_statements(fn.body), key=lambda s: (s.lineno, s.col_offset))
    aug = {id(s.target) for s in stmts if isinstance(s, ast.AugAssign)}
    if any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
           and id(n) not in aug for n in ast.walk(fn.body if isinstance(fn, ast.Lambda) else fn)):
        return None  # rebound (`grad = p.grad`): not the parameter any more
    for s in stmts:
        if isinstance(s, ast.AugAssign) and isinstance(s.target, ast.Name) \
                and s.target.id == name:
            return s
        if isinstance(s, (ast.Assign, ast.AugAssign)) and any(
                isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                and t.value.id == name
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target])):
            return s
        for n in (ast.walk(s) if isinstance(s, ast.expr) else own_nodes(s)):
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
                    and f.value.id == name and f.attr.endswith("_") \
                    and not f.attr.startswith("_") and f.attr not in NOT_VALUES:
                return s
            if n.args and isinstance(n.args[0], ast.Name) and n.args[0].id == name and \
                    (ctx.qualified_name(f) or "") in COLLECTIVES:
                return s
    return None


class PostAccumulateHookWritesParameter(Rule):
    """A function registered with `p.register_post_accumulate_grad_hook(hook)` changes its
    argument in place (`grad /= world`, `dist.all_reduce(grad)`, `grad.mul_(s)`) as if it
    were the gradient.

    Why: unlike a tensor's `register_hook` (called with the gradient), a post-accumulate-grad
    hook is called with the *parameter itself* once its `.grad` is accumulated (checked on
    torch 2.13: the argument `is` the parameter, and `arg /= 2` halves the weight while
    `.grad` stays as it was). A data-parallel wrapper that all-reduces and averages its
    argument there averages the replicas' weights instead of their gradients: the gradients
    are never synchronised and the replicas drift apart, silently (picotron issue 39). Work
    on `param.grad` (`dist.all_reduce(param.grad)`), or register the hook with
    `register_hook` on the parameter if a gradient is what it expects. Known limits: the hook
    must be a function or method of the file, a lambda, or a `functools.partial` of one;
    writes through another name bound to the argument are not followed.
    """

    code = "GT146"
    name = "post-accumulate-hook-writes-parameter"
    message = ("`{hook}` is registered with `register_post_accumulate_grad_hook`, which calls it "
               "with the parameter itself, not its gradient: `{write}` changes the parameter's "
               "values and leaves `.grad` as it was; write `{arg}.grad` instead")
    triggers = (REGISTER,)
    examples = [
        Bad("""
            import torch.distributed as dist

            def average(grad):
                dist.all_reduce(grad)
                grad /= dist.get_world_size()

            def wrap(model):
                for p in model.parameters():
                    p.register_post_accumulate_grad_hook(average)
            """, at=(4, 4)),
        Good("""
            import torch.distributed as dist

            def average(param):
                dist.all_reduce(param.grad)
                param.grad /= dist.get_world_size()

            def wrap(model):
                for p in model.parameters():
                    p.register_post_accumulate_grad_hook(average)
            """),
        Good("""
            import torch.distributed as dist

            def average(grad):
                dist.all_reduce(grad)
                return grad / dist.get_world_size()

            def wrap(model):
                for p in model.parameters():
                    p.register_hook(average)
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == REGISTER):
            return
        got = _hook_of(ctx, node)
        if got is None:
            return
        fn, arg = got
        for other, _, _ in call_sites(ctx, REGISTER):
            if other is node:
                break
            if (o := _hook_of(ctx, other)) is not None and o[0] is fn:
                return  # reported from the first registration of the same hook
        at = _first_write(ctx, fn, arg)
        if at is None:
            return
        hook = getattr(fn, "name", "lambda")
        shown = ctx.source(at).strip().splitlines()[0]
        rel = (Related(ctx.path, node.lineno, f"`{hook}` is registered here", ctx.column(node)),)
        yield self.report(at, ctx, related=rel, hook=hook, write=shown, arg=arg)
