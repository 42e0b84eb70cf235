"""GT620: a tensor region overwritten in place with a transpose (permute, swapaxes...) of
itself: `x[1] = x[1].transpose(-2, -1)`, `m.copy_(m.t())`.

# NOTE [overlapping self-copy]
A transpose is a view: it reads the very memory the assignment writes. When the written
region is contiguous PyTorch detects the partial overlap and raises ``RuntimeError:
unsupported operation: some elements of the input tensor and the written-to tensor refer to
a single memory location. Please clone() the tensor before performing the operation.``;
when it is strided (``x[:, 0] = x[:, 0].transpose(-2, -1)``) the copy runs and some
elements are read after they were overwritten: the values are wrong, silently (both checked
on torch 2.13). ``x[1] = x[1].transpose(-2, -1).clone()`` (or an out-of-place rebuild)
copies first.

# NOTE [own transpose added in place]
An in-place arithmetic write (`m += m.t()`, `m.add_(m.mT)`, `m *= m.T`) reads the same view:
a dense tensor raises the partial-overlap error above (checked on torch 2.13 for `+=`, `-=`,
`add_`, `mul_`). A sparse tensor (`torch.sparse_coo_tensor(...)`, `.to_sparse()`) keeps no
shared memory with its transpose, so the write runs; but `sparse_coo_tensor` saves its output
for backward, and when its values carry a graph the backward raises "... which is output 0 of
SparseCooTensorWithDimsAndTensors, is at version 1" (pytorch3d's `cot_laplacian`, `L +=
L.t()`). So a sparse target is reported only where a gradient flows (its values carry a graph,
the statement is differentiated); `L = L + L.t()` builds a new tensor.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.leaf._writes import own_statements
from gradtrace.lint.rules.numerics._ops import carries_graph, in_training

PERMUTES = frozenset({"transpose", "permute", "t", "swapaxes", "swapdims", "movedim",
                      "moveaxis", "adjoint"})
PERMUTED = frozenset({"T", "mT", "mH", "H"})
# methods whose result is a tensor (the written container must be one: a list or a dict
# element rebound to a transpose is no write)
TENSOR_METHODS = frozenset({"view", "reshape", "flatten", "unflatten", "contiguous", "clone",
                            "float", "double", "half", "to", "cuda", "detach", "view_as",
                            "reshape_as", "new_zeros", "new_empty", "new_ones", "new_full",
                            "squeeze", "unsqueeze", "permute", "transpose", "expand",
                            "repeat", "type_as", "masked_fill", "narrow", "softmax"})


def _same(a: ast.AST, b: ast.AST) -> bool:
    return ast.dump(a) == ast.dump(b).replace("ctx=Store()", "ctx=Load()") or \
        ast.dump(a).replace("ctx=Store()", "ctx=Load()") == ast.dump(b)


def _permuted_self(value: ast.AST, target: ast.AST) -> bool:
    """``value`` is a chain of permuting views of exactly ``target``."""
    seen = False
    while True:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
                and value.func.attr in PERMUTES:
            value, seen = value.func.value, True
        elif isinstance(value, ast.Attribute) and value.attr in PERMUTED:
            value, seen = value.value, True
        else:
            break
    return seen and _same(value, target)


def _tensor_made(ctx: Context, v: ast.AST | None) -> bool:
    """``v`` surely builds a tensor: a tensor method (``x.view(...)``) or a ``torch.*``
    factory or op (not a container)."""
    if not isinstance(v, ast.Call):
        return False
    if isinstance(v.func, ast.Attribute) and v.func.attr in TENSOR_METHODS:
        return True
    q = ctx.qualified_name(v.func) or ""
    return q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.utils.")) \
        and q not in LOADERS


# torch functions returning whatever was saved (a checkpoint's dict), not a tensor
LOADERS = frozenset({"torch.load", "torch.hub.load", "torch.hub.load_state_dict_from_url"})


def _mapping_entry(target: ast.Subscript) -> bool:
    """``sd["model"]["psi"] = sd["model"]["psi"].t()``: the write's own key is a string, so
    what it indexes is a mapping (a tensor takes no string index): the entry is rebound to
    the transpose, no memory is written."""
    return isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str)


# in-place arithmetic methods whose argument is read while the receiver is written
ARITH_INPLACE = frozenset({"add_", "sub_", "mul_", "div_", "addcmul_", "addcdiv_",
                           "true_divide_", "copy_"})
# methods only a tensor has (numpy arrays also have reshape/transpose/view/flatten: `a += a.T`
# is fine there)
TENSOR_ONLY = frozenset({"clone", "contiguous", "float", "half", "to", "cuda", "detach",
                         "view_as", "reshape_as", "new_zeros", "new_empty", "new_ones",
                         "new_full", "unsqueeze", "permute", "expand", "type_as", "masked_fill",
                         "softmax", "to_dense", "to_sparse", "to_sparse_coo", "coalesce"})
SPARSE_METHODS = frozenset({"to_sparse", "to_sparse_coo", "to_sparse_csr", "coalesce"})


def _arith_builder(ctx: Context, fn: ast.AST, target: ast.AST, line: int
                   ) -> tuple[ast.Call, bool] | None:
    """(the call that last bound ``target`` before ``line``, whether it makes a sparse
    tensor) when it surely makes a torch tensor (NOTE [own transpose added in place])."""
    want = ast.unparse(target)
    last: ast.Assign | None = None
    for s in own_statements(fn.body):  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and s.lineno < line and any(
                ast.unparse(t) == want for t in s.targets) and (
                    last is None or s.lineno > last.lineno):
            last = s
    v = last.value if last is not None else None
    if not isinstance(v, ast.Call):
        return None
    if isinstance(v.func, ast.Attribute) and v.func.attr in TENSOR_ONLY:
        return v, v.func.attr in SPARSE_METHODS
    q = ctx.qualified_name(v.func) or ""
    if q.startswith("torch.") and not q.startswith(("torch.nn.", "torch.utils.")):
        return v, "sparse" in q
    return None


def _sparse_differentiated(ctx: Context, built: ast.Call, node: ast.AST) -> bool:
    """A sparse tensor's values carry a graph and the write is differentiated."""
    values = built.args[1] if len(built.args) > 1 else built.func.value \
        if isinstance(built.func, ast.Attribute) else None
    if values is None:
        values = next((k.value for k in built.keywords if k.arg == "values"), None)
    return values is not None and ctx.grad_disabled is None \
        and carries_graph(ctx, values, node) and ctx.statement is not None \
        and in_training(ctx, ctx.statement)


def _container(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.Subscript):
        e = e.value
    return e


def _bound_to_tensor(ctx: Context, fn: ast.AST, target: ast.AST, line: int) -> bool:
    """The last assignment to ``target`` (a name or ``self.x``) before ``line`` in ``fn``
    builds a tensor."""
    want = ast.unparse(target)
    last: ast.Assign | None = None
    for s in own_statements(fn.body):  # type: ignore[attr-defined]
        if isinstance(s, ast.Assign) and s.lineno < line and any(
                ast.unparse(t) == want for t in s.targets) and (
                    last is None or s.lineno > last.lineno):
            last = s
    return last is not None and _tensor_made(ctx, last.value)


class InplaceCopyFromOwnTranspose(Rule):  # NOTE [overlapping self-copy]
    """A region of a tensor is overwritten with a transpose of itself: `out[1] =
    out[1].transpose(-2, -1)`, `m.copy_(m.t())`, `x[k] = x[k].permute(0, 2, 1)`.

    Why: the transpose is a view of the memory being written. PyTorch refuses the copy when
    it sees the overlap: `RuntimeError: unsupported operation: some elements of the input
    tensor and the written-to tensor refer to a single memory location. Please clone() the
    tensor before performing the operation.` (a contiguous region, as `out[1]` of a fresh
    tensor); when the region is strided (`x[:, 0]`) the copy runs and reads elements it has
    already overwritten, and the result is wrong without an error
    (NOTE [overlapping self-copy]; both checked on torch 2.13). Clone the transpose first
    (`out[1] = out[1].transpose(-2, -1).clone()`) or build the result out of place
    (`torch.stack([out[0], out[1].transpose(-2, -1)])`).
    An in-place arithmetic write of its own transpose (`L += L.t()`, `m.add_(m.T)`) is the same
    read of the memory being written; on a sparse tensor (`torch.sparse_coo_tensor`) it runs,
    and fails in backward when its values carry a graph (NOTE [own transpose added in place]):
    write `L = L + L.t()`.
    Known limits: the two sides must be spelt the same (`a[i]` and `a[i]`); a region reached
    through another name (`b = a[1]; a[1] = b.t()`) is not followed; the indexed tensor must
    be bound in the same function to a tensor method's or a `torch.*` function's result (a
    list or dict element rebound to a transpose writes nothing).
    """

    code = "GT620"
    name = "inplace-copy-from-own-transpose"
    message = ("`{target}` is overwritten in place with a transpose of itself, {effect}")
    DENSE = ("a view of the same memory: PyTorch raises 'some elements of the input tensor and "
             "the written-to tensor refer to a single memory location' (or, on a strided "
             "region, the values come out wrong); clone the transpose first")
    SPARSE = ("and the sparse tensor is the saved output of its constructor: backward raises "
              "'one of the variables needed for gradient computation has been modified by an "
              "inplace operation'; build it out of place (`L = L + L.t()`)")
    triggers = ("transpose", "permute", ".t()", "swapaxes", "swapdims", "movedim", ".T",
                ".mT", "moveaxis", "adjoint", ".mH", ".H")
    gate_statements = True
    examples = [
        Bad("""
            import torch

            def symmetrise(scores):
                pair = scores.view(2, -1, 4, 4)
                pair[1] = pair[1].transpose(-2, -1)
                return pair.mean(0)
            """, at=(5, 4)),
        Good("""
            import torch

            def symmetrise(scores):
                pair = scores.view(2, -1, 4, 4)
                pair[1] = pair[1].transpose(-2, -1).clone()
                return pair.mean(0)
            """),
        Good("""
            import torch

            def swap(a):
                a[0] = a[1].transpose(-2, -1)
                return a
            """),
        Bad("""
            import torch

            def symmetric(w):
                s = torch.matmul(w, w.new_ones(w.shape[1], w.shape[0]))
                s += s.t()
                return s
            """, at=(5, 4)),
        Good("""
            import torch

            def symmetric(w):
                s = torch.matmul(w, w.new_ones(w.shape[1], w.shape[0]))
                s = s + s.t()
                return s
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        for t in node.targets:
            if isinstance(t, ast.Subscript) and not _mapping_entry(t) \
                    and _permuted_self(node.value, t) and _bound_to_tensor(ctx, ctx.function or ctx.tree, _container(t),
                                         node.lineno):
                yield self.report(node, ctx, target=ctx.source(t), effect=self.DENSE)
                return

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        effect = _permuted_self(node.value, node.target) \
            and self._written(ctx, node.target, node)
        if effect:
            yield self.report(node, ctx, target=ctx.source(node.target), effect=effect)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        c = node.value
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr == "copy_" and len(c.args) == 1 \
                and _permuted_self(c.args[0], c.func.value):
            yield self.report(node, ctx, target=ctx.source(c.func.value), effect=self.DENSE)
        elif isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                and c.func.attr in ARITH_INPLACE and c.args \
                and _permuted_self(c.args[0], c.func.value):
            effect = self._written(ctx, c.func.value, node)
            if effect:
                yield self.report(node, ctx, target=ctx.source(c.func.value), effect=effect)

    def _written(self, ctx: Context, target: ast.AST, node: ast.stmt) -> str:
        """NOTE [own transpose added in place]: what goes wrong when the written tensor was
        bound in this function to a torch tensor, dense, or sparse with a graph flowing
        through the write; "" otherwise."""
        got = _arith_builder(ctx, ctx.function or ctx.tree, _container(target), node.lineno)
        if got is None:
            return ""
        built, sparse = got
        if not sparse:
            return self.DENSE
        return self.SPARSE if _sparse_differentiated(ctx, built, node) else ""
