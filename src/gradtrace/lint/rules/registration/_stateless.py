"""Which classes of the file own no parameters (and no buffers): the facts under
:func:`~._modules.owns_params`, with the file's module classes and the container names."""
from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.registration._numbers import stores_number as a_number
from gradtrace.lint.rules.registration._wrapped_lists import wraps_free
from gradtrace.lint.nodes import of_types, walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# torch.nn layers that own parameters by default (ReLU, Dropout, pooling... own none)
PARAM_LAYER_RE = re.compile(
    r"^(Lazy)?(Linear|Bilinear|Conv\w*|BatchNorm\w*|SyncBatchNorm|LayerNorm|GroupNorm|RMSNorm|"
    r"Embedding\w*|RNN|LSTM|GRU|RNNCell|LSTMCell|GRUCell|MultiheadAttention|Transformer\w*|"
    r"PReLU)$")


CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Sequential",
                        "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Parameter",
                        "torch.nn.Buffer"})


def module_classes(ctx: Context) -> frozenset[str]:
    """Names of the classes of this file that are ``nn.Module`` subclasses (transitively)."""
    return ctx.analysis.module_classes


# namespaces of parameter-free data transforms (`torchaudio.transforms.Resample`)
STATELESS_NAMESPACES = ("torchaudio.transforms.", "torchvision.transforms.")


OWNING_CALLS = frozenset({"register_parameter", "register_buffer", "add_module",
                          "register_module", "setattr"})


def stateless_classes(ctx: Context) -> frozenset[str]:
    """Module classes of this file that visibly own no parameter or buffer: every base is
    ``nn.Module`` or such a class, no method builds a layer with parameters, a parameter, a
    buffer, a tensor that requires grad or an unknown object stored on ``self``, nor stores an
    argument that may be a module (``self.m = m``; not one read only as a number)."""
    def make() -> frozenset[str]:
        classes = {n: c.node for n, c in ctx.analysis.classes.items()}
        known = module_classes(ctx)
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, c in classes.items():
                if name in known and name not in out and _stateless(c, out, ctx):
                    out.add(name)
                    changed = True
        return frozenset(out)
    return ctx.memo("gt4-stateless-classes", ctx.tree, make)


def param_free_classes(ctx: Context) -> frozenset[str]:
    """Module classes of this file that create no parameter, though they may hold state that
    is no parameter: buffers (``register_buffer``), tensors, instances of the file's plain
    (non-module) classes, and arguments the class never calls (CRD's ``ContrastMemory``: a
    memory bank of buffers; ``ContrastLoss(num_data)``). What ``parameters()`` yields."""
    def make() -> frozenset[str]:
        classes = {n: c.node for n, c in ctx.analysis.classes.items()}
        known = module_classes(ctx)
        out: set[str] = set(stateless_classes(ctx))
        changed = True
        while changed:
            changed = False
            for name, c in classes.items():
                if name in known and name not in out and _stateless(c, out, ctx, True):
                    out.add(name)
                    changed = True
        return frozenset(out)
    return ctx.memo("gt4-param-free-classes", ctx.tree, make)


def _called_attrs(c: ast.ClassDef) -> set[str]:
    """``x`` of every ``self.x(...)`` call and ``self.x.<method>(...)`` in ``c``."""
    return {dotted(n.func if isinstance(n.func, ast.Attribute) and dotted(n.func.value) == "self"
                   else n.func.value)[5:]  # type: ignore[index]
            for n in walk(c) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and dotted(n.func.value) is not None and (dotted(n.func.value) == "self" or isinstance(
                n.func.value, ast.Attribute) and dotted(n.func.value.value) == "self")}


def _stateless(c: ast.ClassDef, stateless: set[str], ctx: Context,
               params_only: bool = False) -> bool:
    from gradtrace.lint.rules.leaf._tensors import grad_factory, is_parameter_call
    for b in c.bases:
        if not _plain_module_base(b, ctx) and \
                not (isinstance(b, ast.Name) and b.id in stateless):
            return False
    for fn in c.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        maybe_module = _non_constant_args(fn) - _value_args(fn, ctx) - _passed_values(fn, ctx)
        owning = OWNING_CALLS - {"register_buffer"} if params_only else OWNING_CALLS
        called = _called_attrs(c) if params_only else set()
        for n in walk(fn):
            if isinstance(n, ast.Call):
                f = n.func
                if (isinstance(f, ast.Attribute) and f.attr in owning) or \
                        is_parameter_call(n, ctx) or grad_factory(n, ctx) is not None or \
                        _owning_ctor(n, stateless, ctx) and not wraps_free(n, fn, stateless, ctx):
                    return False
            elif isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and dotted(t.value) == "self" for t in n.targets):
                v = n.value
                if params_only and (isinstance(v, ast.Name) and not any(
                        isinstance(t, ast.Attribute) and t.attr in called for t in n.targets)
                        or isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                        and v.func.id in ctx.analysis.classes
                        and v.func.id not in module_classes(ctx)):
                    continue  # an argument never called, a plain object of the file
                if isinstance(v, ast.Name) and v.id in maybe_module and not a_number(n, c, ctx):
                    return False  # `self.m = m`: maybe the caller's module
                if isinstance(v, ast.Call) and not _plain_value_call(v, stateless, ctx) \
                        and not wraps_free(v, fn, stateless, ctx):
                    # (a container of them: NOTE [container of parameter-free wrappers])
                    return False  # an object from an unknown call: it may hold parameters
    return True


def _plain_module_base(b: ast.expr, ctx: Context) -> bool:
    """``torch.nn.Module`` itself, also when the file gets ``nn`` from a star import
    (``from torch_snippets import *``, which re-exports torch's ``nn``): ``nn.Module`` whose
    ``nn`` no import of the file binds, in a file with an absolute ``import *``."""
    q = ctx.qualified_name(b)
    if q == "torch.nn.Module":
        return True
    return q == "nn.Module" and not ctx.imports.is_imported("nn") and any(
        isinstance(s, ast.ImportFrom) and not s.level and any(a.name == "*" for a in s.names)
        for s in ctx.tree.body)


# methods a tensor has and an nn.Module has not: their result holds no module
TENSOR_ONLY_METHODS = frozenset({"item", "tolist", "size", "numel", "dim", "sum", "mean",
                                 "long", "int", "bool", "nonzero", "view", "reshape",
                                 "unsqueeze", "squeeze", "flatten", "repeat",
                                 "repeat_interleave", "argmax", "argmin"})


NOT_TENSOR_OPS = ("torch.load", "torch.hub.", "torch.jit.", "torch.compile")


PLAIN_BUILTINS = frozenset({"int", "float", "str", "bool", "len", "round", "list", "tuple",
                            "dict", "set", "min", "max", "abs", "sum", "range", "sorted"})


def _plain_value_call(v: ast.Call, stateless: set[str], ctx: Context, depth: int = 0) -> bool:
    """A call whose result holds no module: a builtin, ``math``/``numpy``, a ``torch``
    function or parameter-free layer, a data transform, a parameter-free class of this file,
    a function of this file that returns only such values (SSIM's ``create_window``)."""
    if isinstance(v.func, ast.Name) and (v.func.id in PLAIN_BUILTINS or v.func.id in stateless):
        return True
    if isinstance(v.func, ast.Attribute) and v.func.attr in TENSOR_ONLY_METHODS:
        return True  # `block_mask.sum().long().item()`: a number or tensor, never a module
    q = ctx.call_name(v) or ""
    if q.startswith(("math.", "numpy.", "torch.", *STATELESS_NAMESPACES)):
        return True
    if isinstance(v.func, ast.Attribute) and _tensor_receiver(v.func.value, stateless, ctx,
                                                              depth + 1):
        return True  # `(g @ g.t()).expand(c, 1, k, k).contiguous()`: a tensor's method
    fn = ctx.analysis.functions.get(v.func.id) if isinstance(v.func, ast.Name) else None
    return fn is not None and depth < 3 and _returns_plain(fn, stateless, ctx, depth + 1)


def _tensor_receiver(e: ast.AST, stateless: set[str], ctx: Context, depth: int) -> bool:
    """``e`` is arithmetic, a torch op or a function of the file returning plain values: a
    tensor or a number, whose methods give tensors or numbers, never a module."""
    if isinstance(e, (ast.BinOp, ast.UnaryOp)):
        return True
    if not isinstance(e, ast.Call):
        return False
    q = ctx.call_name(e) or ""
    if q.startswith("torch."):  # `torch.nn.utils.weight_norm(m)` gives a module back
        return q.rpartition(".")[2][:1].islower() and not q.startswith(NOT_TENSOR_OPS) \
            and (not q.startswith("torch.nn.") or q.startswith("torch.nn.functional."))
    if isinstance(e.func, ast.Attribute):
        return e.func.attr in TENSOR_ONLY_METHODS or depth < 4 and _tensor_receiver(
            e.func.value, stateless, ctx, depth + 1)
    return isinstance(e.func, ast.Name) and e.func.id in ctx.analysis.functions and \
        _plain_value_call(e, stateless, ctx, depth)


def _returns_plain(fn: ast.FunctionDef | ast.AsyncFunctionDef, stateless: set[str],
                   ctx: Context, depth: int) -> bool:
    """A function of the file that builds no module with parameters and returns only constants,
    arithmetic, plain calls or names bound only to those (``w = Variable(...); return w``)."""
    from gradtrace.lint.rules.leaf._tensors import grad_factory, is_parameter_call
    binds: dict[str, list[ast.AST]] = {}
    rets: list[ast.AST] = []  # what each `return` gives
    for n in walk(fn):
        if isinstance(n, ast.Call) and (
                _owning_ctor(n, stateless, ctx) or is_parameter_call(n, ctx)
                or grad_factory(n, ctx) is not None):
            return False
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    binds.setdefault(t.id, []).append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and isinstance(n.target, ast.Name):
            binds.setdefault(n.target.id, []).append(n.value or ast.Constant(None))
        elif isinstance(n, ast.Return):
            rets.append(n.value if n.value is not None else ast.Constant(None))

    def plain_value(e: ast.AST) -> bool:
        if isinstance(e, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare)):
            return True
        return isinstance(e, ast.Call) and _plain_value_call(e, stateless, ctx, depth)

    def plain(e: ast.AST) -> bool:  # a value, or a name bound only to values
        if isinstance(e, ast.Name) and e.id in binds:
            return all(plain_value(x) for x in binds[e.id])
        return plain_value(e)
    return bool(rets) and all(plain(r) for r in rets)


def _owning_ctor(n: ast.Call, stateless: set[str], ctx: Context) -> bool:
    """A call that builds a module which has (or may have) parameters."""
    if not module_ctor(n, ctx):
        return False
    if isinstance(n.func, ast.Name) and n.func.id in stateless:
        return False
    q = ctx.call_name(n) or ""
    if not q.startswith("torch.nn."):
        return True
    last = q.rpartition(".")[2]
    return bool(PARAM_LAYER_RE.match(last)) or last in ("Sequential", "ModuleList", "ModuleDict")


def _value_args(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> set[str]:
    """Arguments ``fn`` uses as numbers, so no module: an operand of arithmetic (``(k - 1) //
    2``) or a size given to a torch layer (``nn.AvgPool1d(kernel_size=k)``; not a container)."""
    out: set[str] = set()
    for n in of_types(fn, (ast.BinOp, ast.Call)):
        if isinstance(n, ast.BinOp):
            out.update(x.id for x in (n.left, n.right) if isinstance(x, ast.Name))
        elif isinstance(n, ast.Call):
            q = ctx.call_name(n) or ""
            last = q.rpartition(".")[2]
            if q == "torch.nn." + last and q not in CONTAINERS and last[:1].isupper() and \
                    last not in ("Sequential", "ModuleList", "ModuleDict"):
                out.update(x.id for x in (*n.args, *(k.value for k in n.keywords))
                           if isinstance(x, ast.Name))
    return out


def _passed_values(fn: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context) -> set[str]:
    """Arguments of a constructor that every ``Cls(...)`` of this file (at least one) passes a
    plain value: a constant, an f-string, arithmetic, or a config entry read by a constant key
    (``loss_weights['dur_loss_weight']``): no module (radtts's ``AttributePredictionLoss(
    'duration', dur_model_config, loss_weights['dur_loss_weight'])``)."""
    if fn.name != "__init__":
        return set()
    out = set()
    for x in _non_constant_args(fn):
        vals = ctx.analysis.argument_values(fn, x)
        if vals and all(_plain_value(v) for v, _ in vals):
            out.add(x)
    return out


def _plain_value(v: ast.AST) -> bool:
    if isinstance(v, (ast.Constant, ast.JoinedStr, ast.BinOp)):
        return True
    if isinstance(v, ast.UnaryOp):
        return isinstance(v.operand, ast.Constant)
    return isinstance(v, ast.Subscript) and isinstance(v.value, ast.Name) and isinstance(
        v.slice, ast.Constant) and isinstance(v.slice.value, str)


def _non_constant_args(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Arguments without a constant default (they may be passed a module)."""
    a = fn.args
    pos = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    pairs = [*zip(pos, defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    out = {x.arg for x, d in pairs if not isinstance(d, ast.Constant) and x.arg != "self"}
    out |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    return out
