"""The kinds of value the data-flow facts of :mod:`gradtrace.lint.flow` tell apart
(:data:`KINDS`), the tables of torch calls and methods that decide a result's kind, and the
:meth:`Scope.kind` queries (a base class of :class:`~gradtrace.lint.flow.Scope`).
:mod:`gradtrace.lint.flow` re-exports every name."""
from __future__ import annotations

import ast

from gradtrace.lint.names import dotted

GRAPH = "graph"          # a tensor that may carry a grad_fn (model output, loss, op on such)
NUMBER = "number"        # a Python number or list of numbers (.item(), float(t), .tolist())
NUMPY = "numpy"          # a NumPy array (.numpy(), np.array(t))
DETACHED = "detached"    # a tensor cut from the graph (.detach(), .data, made under no_grad)
LEAF = "leaf"            # a new tensor without history (torch.tensor(...), torch.zeros(...))
MODULE = "module"        # an nn.Module instance
PARAMETER = "parameter"  # an nn.Parameter
PARAMS = "params"        # an iterable of parameters (model.parameters())
OPTIMIZER = "optimizer"  # a torch.optim optimizer
NONE = "none"            # the None returned by backward()/step()/zero_grad()/load_state_dict()
KINDS = (GRAPH, NUMBER, NUMPY, DETACHED, LEAF, MODULE, PARAMETER, PARAMS, OPTIMIZER, NONE)

# method name -> kind of its result, whatever the receiver (tensor methods).
METHOD_KINDS = {
    "item": NUMBER, "tolist": NUMBER, "numpy": NUMPY, "detach": DETACHED,
    "parameters": PARAMS, "named_parameters": PARAMS,
    "backward": NONE, "zero_grad": NONE, "load_state_dict": NONE,
}
# methods that return a value of the same kind as the receiver
SAME_KIND = frozenset({
    "to", "cpu", "cuda", "float", "double", "half", "bfloat16", "long", "int", "view",
    "reshape", "contiguous", "clone", "squeeze", "unsqueeze", "flatten", "permute", "transpose",
    "t", "expand", "repeat", "sum", "mean", "pow", "sqrt", "exp", "log", "abs", "mul", "add",
    "sub", "div", "matmul", "softmax", "log_softmax", "sigmoid", "tanh", "relu", "norm",
    "clamp", "neg", "type_as", "squeeze_", "unsqueeze_", "chunk", "split",
    # in-place fills and random draws return the receiver (`torch.empty(n).uniform_(0, 1)`)
    "uniform_", "normal_", "bernoulli_", "exponential_", "random_", "fill_", "zero_",
})
# nn.Module methods that return the module itself (checked on torch 2.13)
MODULE_SELF_RETURNING = frozenset({"train", "eval", "requires_grad_", "apply", "to", "cuda",
                                   "cpu", "float", "double", "half", "bfloat16", "type",
                                   "to_empty", "share_memory"})
CASTS_TO_NUMBER = frozenset({"float", "int", "bool", "complex", "round", "math.sqrt",
                             "math.log", "math.exp", "math.fabs"})
NUMPY_FUNCS = frozenset({"numpy.array", "numpy.asarray", "numpy.mean", "numpy.sum"})
# the tensor constructors (one table for every family): new tensors from sizes or a template,
# with no history whatever the arguments; and copies of a data argument into a new leaf
FACTORY_FUNCS = frozenset({"torch." + f for f in (
    "zeros", "ones", "randn", "rand", "empty", "full", "arange", "linspace", "eye", "randint",
    "randperm", "zeros_like", "ones_like", "randn_like", "rand_like", "empty_like", "full_like",
    "randint_like")})
COPY_FUNCS = frozenset({"torch." + f for f in (
    "tensor", "Tensor", "FloatTensor", "LongTensor", "DoubleTensor", "from_numpy")})
NEW_TENSOR_FUNCS = FACTORY_FUNCS | COPY_FUNCS | {"torch.as_tensor"}
NOT_MODULES = frozenset({"torch.nn.Parameter", "torch.nn.Buffer", "torch.nn.ParameterList",
                         "torch.nn.ParameterDict"})


class ScopeKinds:
    """What kind of value an expression holds (:data:`KINDS`), from the bindings of the
    scope; a base class of :class:`~gradtrace.lint.flow.Scope`."""

    def kind(self, expr: ast.AST | None, line: int | None = None,
             no_grad: bool | None = None) -> str | None:
        """The kind of value ``expr`` evaluates to (None: unknown).

        Names take the kind of their last binding before ``line`` (default: the line of the
        statement holding ``expr``).
        """
        if expr is None:
            return None
        if line is None or no_grad is None:  # (the bindings' kinds give both: NOTE [lazy scope])
            s = self.statement_of(expr)
            if line is None:
                line = s.lineno if s is not None else getattr(expr, "lineno", 0)
            if no_grad is None:
                no_grad = s is not None and id(s) in self.no_grad
        return self._kind(expr, line, no_grad, 0)

    def _kind(self, e: ast.AST, line: int, no_grad: bool, depth: int) -> str | None:
        if depth > 12:
            return None
        if isinstance(e, (ast.Name, ast.Attribute)):
            if isinstance(e, ast.Attribute) and e.attr == "data":
                return DETACHED
            name = dotted(e)
            b = self.binding_before(name, line) if name else None
            return b.kind if b is not None else None
        if isinstance(e, ast.Constant):
            return NUMBER if isinstance(e.value, (int, float)) and not isinstance(e.value, bool) else None
        if isinstance(e, ast.Call):
            return self._call_kind(e, line, no_grad, depth)
        if isinstance(e, ast.BinOp):
            return self._combine(self._kind(e.left, line, no_grad, depth + 1),
                                 self._kind(e.right, line, no_grad, depth + 1))
        if isinstance(e, ast.UnaryOp):
            return self._kind(e.operand, line, no_grad, depth + 1)
        if isinstance(e, ast.Subscript):
            k = self._kind(e.value, line, no_grad, depth + 1)
            return k if k in (GRAPH, DETACHED, LEAF, NUMPY, NUMBER) else None
        return None

    def _call_kind(self, e: ast.Call, line: int, no_grad: bool, depth: int) -> str | None:
        ctx = self.ctx
        func = e.func
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in METHOD_KINDS:
                return METHOD_KINDS[method]
            qual = ctx.qualified_name(func)
            if qual and qual.startswith("torch."):
                return self._torch_call_kind(qual, e, line, no_grad, depth)
            recv = self._kind(func.value, line, no_grad, depth + 1)
            if method in SAME_KIND and recv in (GRAPH, DETACHED, LEAF, PARAMETER):
                return DETACHED if no_grad and recv in (GRAPH, PARAMETER) else (
                    GRAPH if recv == PARAMETER else recv)
            if method == "step" and recv == OPTIMIZER and not e.args and not e.keywords:
                return NONE
            if method in MODULE_SELF_RETURNING and recv == MODULE:
                return MODULE  # `Net().to(device)`: nn.Module.to/cuda/... return the module
            if recv == MODULE and method == "forward":
                return DETACHED if no_grad else GRAPH
            return None
        qual = ctx.qualified_name(func) or ""
        if qual in CASTS_TO_NUMBER:
            return NUMBER
        if qual in NUMPY_FUNCS:
            return NUMPY
        if qual.startswith("torch."):
            return self._torch_call_kind(qual, e, line, no_grad, depth)
        recv = self._kind(func, line, no_grad, depth + 1)
        if recv == MODULE:
            name = dotted(func)
            b = self.binding_before(name, line) if name else None
            if b is not None and isinstance(b.stmt, ast.ClassDef):
                return MODULE  # `Net(...)` builds a module; calling the instance runs it
            return DETACHED if no_grad else GRAPH
        return None

    def _torch_call_kind(self, qual: str, e: ast.Call, line: int, no_grad: bool,
                         depth: int) -> str | None:
        last = qual.rpartition(".")[2]
        if qual == "torch.nn.Parameter":
            return PARAMETER
        if qual.startswith("torch.nn.") and last[:1].isupper() and qual not in NOT_MODULES:
            return MODULE
        if qual.startswith("torch.optim.") and last[:1].isupper() and ".lr_scheduler." not in qual:
            return OPTIMIZER
        if qual in NEW_TENSOR_FUNCS:
            return LEAF
        if qual.startswith(("torch.nn.functional.", "torch.")) and last[:1].islower():
            kinds = [self._kind(a, line, no_grad, depth + 1) for a in e.args]
            if GRAPH in kinds or PARAMETER in kinds:
                return DETACHED if no_grad else GRAPH
            if kinds and all(k in (DETACHED, LEAF, NUMBER) for k in kinds):
                return DETACHED if DETACHED in kinds else LEAF
        return None

    @staticmethod
    def _combine(a: str | None, b: str | None) -> str | None:
        if a == b:
            return a
        if GRAPH in (a, b) or PARAMETER in (a, b):
            return GRAPH
        if {a, b} <= {NUMBER, None} and (a, b) != (None, None):
            return None  # number op unknown: unknown
        if {a, b} <= {DETACHED, LEAF, NUMBER}:
            return DETACHED
        return None
