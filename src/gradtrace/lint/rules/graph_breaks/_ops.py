"""The torch operations and attributes the loss-path tracer knows (which cut the graph, which
rebuild or make fresh tensors), and two facts it reads per expression or scope."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import walk
from gradtrace.lint.tensor_api import TENSOR_ATTRS

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

NUMBER, NUMPY, REBUILD = "number", "numpy", "rebuild"
DATA, DETACH, NONDIFF = "data", "detach", "nondiff"
# a method that turns its receiver into a value without history, and the cut kind
CUT_METHODS = {
    "item": NUMBER, "tolist": NUMBER, "numpy": NUMPY, "detach": DETACH,
    "argmax": NONDIFF, "argmin": NONDIFF, "argsort": NONDIFF, "round": NONDIFF,
    "sign": NONDIFF, "floor": NONDIFF, "ceil": NONDIFF, "trunc": NONDIFF, "eq": NONDIFF,
    "ne": NONDIFF, "gt": NONDIFF, "lt": NONDIFF, "ge": NONDIFF, "le": NONDIFF,
    "bool": NONDIFF, "long": NONDIFF, "int": NONDIFF, "heaviside": NONDIFF,
}
CUT_FUNCS = {
    "float": NUMBER, "int": NUMBER, "math.sqrt": NUMBER, "math.log": NUMBER,
    "math.exp": NUMBER, "math.fabs": NUMBER, "numpy.array": NUMPY, "numpy.asarray": NUMPY,
    "torch.argmax": NONDIFF, "torch.argmin": NONDIFF, "torch.argsort": NONDIFF,
    "torch.round": NONDIFF, "torch.sign": NONDIFF, "torch.floor": NONDIFF,
    "torch.ceil": NONDIFF, "torch.trunc": NONDIFF, "torch.eq": NONDIFF, "torch.ne": NONDIFF,
    "torch.gt": NONDIFF, "torch.lt": NONDIFF, "torch.ge": NONDIFF, "torch.le": NONDIFF,
    "torch.heaviside": NONDIFF, "torch.nn.functional.one_hot": NONDIFF,
    "torch.detach": DETACH,
}
# tensor constructors that copy their data argument into a new leaf
REBUILD_FUNCS = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor",
                           "torch.LongTensor", "torch.DoubleTensor", "torch.from_numpy",
                           "torch.autograd.Variable", "torch.autograd.variable.Variable"})
# results with no history whatever the arguments
FRESH_FUNCS = frozenset({
    "torch.zeros", "torch.ones", "torch.randn", "torch.rand", "torch.empty", "torch.full",
    "torch.arange", "torch.linspace", "torch.eye", "torch.randint", "torch.zeros_like",
    "torch.ones_like", "torch.randn_like", "torch.rand_like", "torch.empty_like",
    "torch.full_like", "torch.randperm", "len", "range", "isinstance", "torch.is_tensor",
    "torch.numel", "torch.nn.functional.one_hot",
})
FRESH_METHODS = frozenset({"size", "dim", "numel", "new_zeros", "new_ones", "new_empty",
                           "new_full", "zero_", "nelement", "element_size", "data_ptr",
                           "get_device", "stride", "is_contiguous", "isnan", "isinf",
                           "isfinite", "any", "all", "count_nonzero", "nonzero"})
FRESH_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "requires_grad",
                         "is_cuda", "is_leaf", "indices"})
# methods whose arguments are sizes, devices, dims or indices, not differentiable tensors
RECV_ONLY = frozenset({
    "to", "cuda", "cpu", "type", "type_as", "view", "view_as", "reshape", "reshape_as",
    "expand", "expand_as", "repeat", "permute", "transpose", "squeeze", "unsqueeze", "flatten",
    "sum", "mean", "max", "min", "norm", "softmax", "log_softmax", "clamp", "clamp_min",
    "clamp_max", "gather", "index_select", "masked_fill", "narrow", "split", "chunk",
    "contiguous", "float", "double", "half", "t", "abs", "exp", "log", "sqrt", "sigmoid",
    "tanh", "relu", "std", "var", "logsumexp", "cumsum", "prod", "roll", "flip", "unbind",
    "select", "amax", "amin", "nan_to_num", "pow", "square", "neg", "log1p", "float_power",
})
NON_TENSOR_KWARGS = frozenset({"reduction", "dim", "keepdim", "ignore_index", "dtype",
                               "device", "label_smoothing", "p", "eps", "reduce",
                               "size_average", "beta", "delta", "margin", "log_target",
                               "non_blocking", "axis", "num_classes"})
# name guesses (TARGET_RE, OBJECT_RE, INPUT_RE, MODEL_CALLEE_RE...): see analysis.vocabulary.
# An argument named like input data fed to a callee named like a model is the model's input,
# upstream of the model.
MOVES = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "contiguous",
                   "view", "reshape", "flatten", "permute", "unsqueeze", "squeeze"})


@dataclass(frozen=True)
class Cut:
    """One place where a possibly-graph value lost its history."""

    kind: str
    node: ast.expr                  # the cutting expression (the finding's position)
    operand: ast.expr               # the value that was cut
    via: tuple[tuple[str, int], ...] = ()  # names from the sink to the cut: (name, line)


@dataclass(frozen=True)
class Trace:
    live: bool
    cuts: tuple[Cut, ...] = ()

    def __or__(self, other: Trace) -> Trace:
        return Trace(self.live or other.live, self.cuts + other.cuts)


DEAD = Trace(False)
LIVE = Trace(True)


def _detached_copy(e: ast.expr) -> bool:
    """``x.detach()``, ``x.detach().clone()``, ``x.clone().detach()``, ``x.data.clone()``: the
    idiom that makes an
    independent leaf when ``.requires_grad_()`` follows (reference gradients in tests, inputs
    of a gradient penalty, the cached embeddings of GradCache)."""
    seen = False
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and not e.args \
            and e.func.attr in ("detach", "clone", "contiguous"):
        seen = seen or e.func.attr == "detach"
        e = e.func.value
    # `x.data.clone().requires_grad_()`: the older spelling of the same idiom
    return seen or (isinstance(e, ast.Attribute) and e.attr == "data")


def objects_of(scope: Scope) -> frozenset[str]:
    """Names a scope reads as something other than a tensor: through an attribute no tensor
    has (``batch.edge_index``), a string key (``batch["y"]``) or ``**batch``; their ``.data``
    is a field of that object, not ``Tensor.data``."""
    def make() -> frozenset[str]:
        out: set[str] = set()
        for n in walk(scope.node):
            if isinstance(n, ast.Attribute) and n.attr not in TENSOR_ATTRS:
                recv = dotted(n.value)
            elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) \
                    and isinstance(n.slice.value, str):
                recv = dotted(n.value)
            elif isinstance(n, ast.keyword) and n.arg is None:
                recv = dotted(n.value)
            else:
                continue
            if recv is not None and recv not in ("self", "cls"):
                out.add(recv)
        return frozenset(out)
    return scope.ctx.memo("gt1-objects", scope.node, make)


def _top_defs(ctx: Context) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions at the top of the file by name (the first of each name), built once."""
    def make() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for s in ctx.tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(s.name, s)
        return out
    return ctx.memo("top-defs", ctx.tree, make)
