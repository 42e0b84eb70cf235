"""GT611: the buffers of `dist.all_gather` take the place of the tensor gathered."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.int_values import integer_valued
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.flow import DETACHED, LEAF, NUMBER, NUMPY
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace._ops import _statements

# the c10d collectives that fill buffers given to them: no autograd kernel, the buffers carry
# no history of the tensor gathered (checked on torch 2.13, gloo, world size 1)
GATHERS = frozenset({"torch.distributed.all_gather",
                     "torch.distributed.distributed_c10d.all_gather"})


def _reads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
               for n in ast.walk(node))


class AllGatherDropsGraph(Rule):
    """`dist.all_gather(buffers, t)` then the gathered buffers used in place of `t` (`t =
    torch.cat(buffers)`, or returned from `forward`), `t` itself never read again.

    Why: `torch.distributed.all_gather` copies every rank's tensor into the buffers it is
    given and records nothing for autograd: the buffers have no `grad_fn`, not even this rank's
    own slot. A loss built from them alone has no path back to the model: backward raises
    "element 0 of tensors does not require grad" (SimCLR's NT-Xent), or the branch gathered
    gets no gradient and DDP stops at the next iteration (a ToyModel whose forward returns the
    gathered list). Put the local tensor back into its slot (`buffers[rank] = t`) or use the
    differentiable `torch.distributed.nn.all_gather(t)`.
    Known limits: in one function, where it trains (a module's `forward`, or before a
    backward); any later read of `t` (the slot written back, a local term) is taken as the fix.
    Buffers made as integer tensors (`[torch.zeros(n).long() for _ in ...]`) gather integer
    labels, which carry no gradient: not reported.
    """

    code = "GT611"
    name = "all-gather-drops-graph"
    message = ("`{buffers}` filled by `dist.all_gather` carries no autograd history (line "
               "{line}) and takes the place of `{t}`, which is not read again: no gradient "
               "reaches what made `{t}`; write `{buffers}[rank] = {t}` back or use "
               "`torch.distributed.nn.all_gather`")
    triggers = ("all_gather",)
    examples = [
        Bad("""
            import torch
            import torch.distributed as dist
            from torch import nn

            class Contrastive(nn.Module):
                def forward(self, z):
                    bufs = [torch.zeros_like(z) for _ in range(dist.get_world_size())]
                    dist.all_gather(bufs, z)
                    z = torch.cat(bufs)
                    return (z @ z.T).logsumexp(1).mean()
            """, at=(9, 8)),
        Good("""
            import torch
            import torch.distributed as dist
            from torch import nn

            class Contrastive(nn.Module):
                def forward(self, z):
                    bufs = [torch.zeros_like(z) for _ in range(dist.get_world_size())]
                    dist.all_gather(bufs, z)
                    bufs[dist.get_rank()] = z
                    z = torch.cat(bufs)
                    return (z @ z.T).logsumexp(1).mean()
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef,
                               ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, fn: ast.FunctionDef | ast.AsyncFunctionDef,
               ctx: Context) -> Iterator[Finding]:
        stmts = list(_statements(fn.body))
        for i, s in enumerate(stmts):
            call = s.value if isinstance(s, ast.Expr) else None
            if not (isinstance(call, ast.Call) and len(call.args) >= 2
                    and isinstance(call.args[0], ast.Name) and isinstance(call.args[1], ast.Name)
                    and (ctx.qualified_name(call.func) or "") in GATHERS):
                continue
            bufs, t = call.args[0].id, call.args[1].id
            found = _replaced(stmts[i + 1:], bufs, t, _aliases(stmts[:i], t, bufs))
            if found is None or not _trains(fn, s, t, ctx):
                continue
            yield self.report(s if found is True else found, ctx, buffers=bufs, t=t,
                              line=s.lineno)


def _replaced(after: list[ast.stmt], bufs: str, t: str,
              aliases: frozenset[str] = frozenset()) -> ast.stmt | bool | None:
    """How the buffers take ``t``'s place: the statement rebinding ``t`` from them, or binding
    a new name from them that is read later; True when a ``return`` gives them back; None when
    ``t`` (or a name bound from it before the gather) is read again, or the buffers are not used."""
    held = (t,) + tuple(aliases)
    new = None
    for i, s in enumerate(after):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and s.targets[0].id == t:
            if new is None and not (_reads(s.value, bufs) and not _reads(s.value, t)):
                return None
            return new or s
        if any(_reads(s, n) for n in held):
            return None
        if new is None and isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and _reads(s.value, bufs) \
                and any(_reads(r, s.targets[0].id) for r in after[i + 1:]):
            new = s
        if isinstance(s, ast.Return) and s.value is not None and _reads(s.value, bufs):
            return new or True
    return new


def _aliases(before: list[ast.stmt], t: str, bufs: str) -> frozenset[str]:
    """Names bound before the gather from an expression that reads ``t`` (the buffers, made
    from ``t``'s shape, aside)."""
    return frozenset(tg.id for s in before if isinstance(s, ast.Assign) and _reads(s.value, t)
                     for tg in s.targets if isinstance(tg, ast.Name) and tg.id not in (t, bufs))


def _trains(fn: ast.FunctionDef | ast.AsyncFunctionDef, s: ast.stmt, t: str,
            ctx: Context) -> bool:
    """``t`` may carry a graph where ``s`` runs: grad on, ``t`` not a number, an array, a
    detached tensor or a leaf, in a module's ``forward`` or before a backward of ``fn``."""
    scope = ctx.scope(fn)
    if _integer_buffers(fn, s, ctx) or scope.grad_off_at(s) is not None or scope.kind(ast.Name(t, ast.Load()), s.lineno) in (
            NUMBER, NUMPY, DETACHED, LEAF):
        return False
    info = ctx.analysis.class_of(fn)
    if info is not None and info.is_module and fn.name == "forward":
        return True
    return any(b.call.lineno > s.lineno for b in step_calls(ctx, fn).losses())


def _integer_buffers(fn: ast.FunctionDef | ast.AsyncFunctionDef, s: ast.stmt,
                     ctx: Context) -> bool:
    """The buffers of the gather ``s`` are integer tensors by how they are made (every binding
    a list display or comprehension of them: ``[torch.zeros(n).long().cuda() for _ in ...]``):
    `all_gather` needs the gathered tensor to have their dtype, so it is an integer one (labels),
    which never carries a gradient."""
    bufs = s.value.args[0].id  # type: ignore[attr-defined]
    made = [b.value for b in walk(fn) if isinstance(b, ast.Assign) and b.lineno < s.lineno
            and any(isinstance(t, ast.Name) and t.id == bufs for t in b.targets)]
    elts = [e for v in made for e in (
        [v.elt] if isinstance(v, ast.ListComp) else v.elts if isinstance(v, ast.List) else [None])]
    return bool(elts) and all(e is not None and integer_valued(e, fn) for e in elts)
