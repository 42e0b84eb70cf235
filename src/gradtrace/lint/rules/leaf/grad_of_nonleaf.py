"""GT307: `.grad` read from a non-leaf tensor (an intermediate or a model output)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Binding, Scope
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._nonleaf_attrs import _module_output_attr
from gradtrace.lint.rules.leaf._returns import call_non_leaf, element_non_leaf
from gradtrace.lint.rules.leaf.flags import freezes_flag
from gradtrace.lint.rules.leaf._tensors import grad_leaf_binding, non_leaf_origin, scope_mentions
from gradtrace.lint.nodes import walk


def _helper_origin(scope: Scope, name: str, line: int) -> tuple[Binding, str] | None:
    """``name = helper(...)`` / ``obj.method(...)`` whose return is a non-leaf (NOTE in
    :mod:`._returns`)."""
    b = scope.binding_before(name, line)
    if b is None or b.no_grad or not isinstance(b.value, ast.Call) \
            or isinstance(b.stmt, ast.AugAssign):
        return None
    fn = call_non_leaf(b.value, scope, b.line)
    return (b, f"returned by `{fn}()`, computed there from a tensor that requires grad") \
        if fn is not None else None


class GradOfNonLeaf(Rule):
    """`.grad` is read from a non-leaf tensor (an intermediate or a model output).

    Why: backward populates `.grad` only on leaves. Reading it on a computed tensor returns
    None and warns `UserWarning: The .grad attribute of a Tensor that is not a leaf Tensor is
    being accessed. ...` (pytorch-facts.md#non-leaf-grad). Read the leaf's `.grad` (the parameter
    or the
    input made with `requires_grad=True`), or call `.retain_grad()` on the intermediate
    before backward.
    Where the name's binding is what made it a non-leaf (a leaf's name rebound to a tensor
    computed from it, `w = w.view(2, 2)`, or a name bound to a helper's result,
    `x_adv = attack.perturb(x)`), the binding is reported: the fix (another name,
    `.detach().requires_grad_()`) goes there.
    Known limits: the tensor must be computed in the same function from a leaf that requires
    grad or be a model output (left alone when the function freezes parameters), or be
    returned by a function of this file (or a method of an object of a class of this file)
    that computes it from one, or from an argument that is a non-leaf.
    """

    code = "GT307"
    gate_statements = True
    name = "grad-of-non-leaf"
    message = ("`{name}.grad` reads the gradient of a non-leaf tensor ({why}): it is None "
               "(PyTorch warns) unless `{name}.retain_grad()` was called before backward")
    triggers = (".grad",)
    examples = [
        Bad("""
            import torch
            x = torch.randn(3, requires_grad=True)
            y = x * 2
            y.sum().backward()
            print(y.grad)
            """, at=(5, 6)),
        Bad("""
            import torch
            w = torch.linspace(0, 1, 8, requires_grad=True)
            w = w.view(2, 4)
            w.pow(2).sum().backward()
            print(w.grad)
            """, at=(3, 0)),
        Bad("""
            import torch
            model = torch.nn.Linear(4, 2)
            out = model(x)
            out.sum().backward()
            saliency = out.grad.abs()
            """, at=(5, 11)),
        Good("""
            import torch
            x = torch.randn(3, requires_grad=True)
            y = x * 2
            y.retain_grad()
            y.sum().backward()
            print(y.grad, x.grad)
            """),
        Good("""
            import torch
            model = torch.nn.Linear(4, 2)
            x.requires_grad_()
            out = model(x)
            out.sum().backward()
            saliency = x.grad.abs()
            """),
    ]

    def visit_Attribute(self, node: ast.Attribute, ctx: Context) -> Iterator[Finding]:
        if node.attr == "grad" and isinstance(node.ctx, ast.Load) \
                and isinstance(node.value, ast.Subscript):
            yield from self._entry(node, node.value, ctx)
            return
        if node.attr == "grad" and isinstance(node.ctx, ast.Load) \
                and isinstance(node.value, ast.Attribute):
            got = _module_output_attr(node.value, ctx)  # `model.feat.grad`
            seen: set[int] = ctx.memo("gt307-attr-reported", ctx.tree, set)
            if got is not None and id(got) not in seen:
                seen.add(id(got))  # reported where the output is kept: the fix goes there
                yield self.report(got, ctx, related=[Related(
                    ctx.path, node.lineno, "its `.grad` is read here", ctx.column(node))],
                    name=ctx.source(node.value), why=f"`self.{node.value.attr}`, bound here "
                    f"to a layer's output; read at line {node.lineno}")
            return
        if node.attr != "grad" or not isinstance(node.ctx, ast.Load) \
                or not isinstance(node.value, ast.Name):
            return
        name = node.value.id
        if not scope_mentions(ctx, "requires_grad", "Parameter", ".backward("):
            return
        scope = ctx.scope()
        got = non_leaf_origin(scope, name, node.lineno)
        if got is None:
            got = _helper_origin(scope, name, node.lineno)
        if got is None or got[1] in ("made-non-leaf", "rebound"):
            return
        if any(m.receiver == name for m in scope.calls_to("retain_grad")):
            return
        b, why = got
        if why == "a model output" and freezes_flag(scope, b):
            return
        if why.startswith("computed from `") and _moved_where_it_may_be(b, scope, ctx):
            return  # NOTE [device of a wrapped argument]
        if why.startswith("returned by") or why == f"computed from `{name}`":
            # the name was a leaf's, or is a helper's result: the binding made it a non-leaf,
            # and the fix (another name, `.detach().requires_grad_()`) goes there
            seen: set[int] = ctx.memo("gt307-bindings-reported", ctx.tree, set)
            if id(b.stmt) in seen:
                return
            seen.add(id(b.stmt))
            yield self.report(b.stmt, ctx, related=[Related(
                ctx.path, node.lineno, f"`{name}.grad` is read here", ctx.column(node))],
                name=name, why=_rebound_why(why, name))
            return
        yield self.report(node, ctx, related=[Related(ctx.path, b.line, f"`{name}` is computed "
                          "here", ctx.column(b.stmt))], name=name, why=why)


    def _entry(self, node: ast.Attribute, sub: ast.Subscript, ctx: Context
               ) -> Iterator[Finding]:
        """``info["means2d"].grad`` of an entry a helper returns (NOTE [returned entries])."""
        if not scope_mentions(ctx, ".backward("):
            return
        scope = ctx.scope()
        fn = element_non_leaf(sub, scope, node.lineno)
        if fn is not None and not any(  # `info["uv"].retain_grad()`: kept
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "retain_grad" for s in scope.stmts for n in walk(s)):
            yield self.report(node, ctx, name=ctx.source(sub), why=(
                f"an entry of what `{fn}()` returns, computed there from a tensor that "
                "requires grad"))


def _rebound_why(why: str, name: str) -> str:
    if why.startswith("returned by"):
        return f"bound here to a value {why}"
    return f"`{name}` held a leaf that requires grad and is rebound here to a tensor computed from it"


def _moved_where_it_may_be(b: Binding, scope: Scope, ctx: Context) -> bool:
    # NOTE [device of a wrapped argument]
    """``data = Variable(inputs, requires_grad=True)`` then ``data = data.cuda()``, where ``inputs`` is an argument of the function and no call of
    it is in this file. ``Variable`` wraps the caller's tensor on its own device, and
    ``.cuda()`` / ``.to(device)`` of a tensor already there returns the tensor itself, still
    the leaf (pytorch-facts.md: `.to`/`.cuda` return ``self`` when nothing changes). Whether
    it moves depends on callers out of sight: unknown, not reported. A tensor made here
    (``torch.from_numpy``, a factory, ``torch.tensor``, which copies) is on the CPU, and a call
    in this file may hand one: both still reported."""
    from gradtrace.lint.analysis.calls import call_sites
    v, fn = b.value, ctx.function
    if fn is None or not isinstance(v, ast.Call) or not isinstance(v.func, ast.Attribute) \
            or not isinstance(v.func.value, ast.Name) or v.func.attr not in ("cuda", "to"):
        return False
    if v.func.attr == "to" and (any(k.arg == "dtype" for k in v.keywords) or any(
            (ctx.qualified_name(a) or "").startswith("torch.")
            and ctx.qualified_name(a) != "torch.device" for a in v.args)):
        return False  # `.to(torch.float64)`: a cast copies
    leaf = grad_leaf_binding(scope, v.func.value.id, b.line)
    lv = leaf.value if leaf is not None else None
    if not isinstance(lv, ast.Call) or ctx.call_name(lv) != "torch.autograd.Variable" \
            or not lv.args:
        return False
    data = lv.args[0]
    while isinstance(data, ast.Subscript):
        data = data.value
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    if not isinstance(data, ast.Name) or data.id not in params:
        return False
    earlier = scope.binding_before(data.id, lv.lineno)
    if earlier is not None and earlier.value is not None:
        return False  # rebound here first: made in sight
    return not any(True for _ in call_sites(ctx, fn.name))
