"""The one table of what cuts the autograd graph, and the small source shapes around it.

Every rule family asks "does this call keep the value's history?": the graph-break tracer
(:mod:`.origins`), the grad-mode tracer and the training-loop dependency walk read the answer
here. :data:`CUT_METHODS` / :data:`CUT_FUNCS` name each cut with its kind (a Python number,
NumPy, ``.detach()``, a non-differentiable op); :data:`NO_HISTORY_METHODS` are the methods whose
result has no history at all, :data:`INTEGER_METHODS` those whose result is an integer or bool
tensor (no ``grad_fn`` either); :data:`REBUILD_FUNCS` copy their data into a new leaf and
:data:`FRESH_FUNCS` make tensors with no history whatever their arguments. No tracing here.

Loss callees are read here too, two questions: :func:`is_loss_callee` (GT2: a loss call, its
first argument the prediction, NOTE [prediction position]) and :func:`pure_loss` (GT1: bound
to a torch loss, so holding no weights of its own: a call is as live as its arguments; a user
loss class may hold weights). The words behind both are in :mod:`.vocabulary`.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.facts import unpacked_value
from gradtrace.lint.analysis.file_parents import enclosing_class
from gradtrace.lint.analysis.kinds import is_torch_loss  # (other modules import it from here)
from gradtrace.lint.analysis.modules import AUTOGRAD_FUNCTION_BASES
from gradtrace.lint.analysis.packed import _packed_names, packed_values  # noqa: F401 (re-export)
from gradtrace.lint.analysis.vocabulary import LOSS_CALLABLE_RE, LOSS_NAME_RE
from gradtrace.lint.analysis.weightless import weightless_parameter, weightless_value
from gradtrace.lint.flow import COPY_FUNCS, FACTORY_FUNCS, SAME_KIND
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import bfs_walk, statements, walk
from gradtrace.lint.tensor_api import TENSOR_ATTRS

if TYPE_CHECKING:
    from gradtrace.lint.analysis.origins import Tracer
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
    "bool": NONDIFF, "long": NONDIFF, "int": NONDIFF, "heaviside": NONDIFF, "histc": NONDIFF,
}
# methods whose result has no autograd history at all (a Python value, a detached tensor)
NO_HISTORY_METHODS = frozenset({m for m, k in CUT_METHODS.items() if k in (NUMBER, NUMPY, DETACH)}
                               | {"detach_"})
# methods whose result is an integer or bool tensor: no ``grad_fn`` whatever the receiver
INTEGER_METHODS = frozenset({
    "argmax", "argmin", "argsort", "long", "int", "bool", "byte", "short", "eq", "ne", "gt",
    "lt", "ge", "le", "nonzero", "isnan", "isinf", "isfinite", "count_nonzero", "logical_not",
    "logical_and", "logical_or", "signbit", "bincount", "unique",
})
CUT_FUNCS = {
    "float": NUMBER, "int": NUMBER, "math.sqrt": NUMBER, "math.log": NUMBER,
    "math.exp": NUMBER, "math.fabs": NUMBER, "numpy.array": NUMPY, "numpy.asarray": NUMPY,
    "torch.argmax": NONDIFF, "torch.argmin": NONDIFF, "torch.argsort": NONDIFF,
    "torch.round": NONDIFF, "torch.sign": NONDIFF, "torch.floor": NONDIFF,
    "torch.ceil": NONDIFF, "torch.trunc": NONDIFF, "torch.eq": NONDIFF, "torch.ne": NONDIFF,
    "torch.gt": NONDIFF, "torch.lt": NONDIFF, "torch.ge": NONDIFF, "torch.le": NONDIFF,
    "torch.heaviside": NONDIFF, "torch.nn.functional.one_hot": NONDIFF,
    "torch.histc": NONDIFF, "torch.bucketize": NONDIFF, "torch.searchsorted": NONDIFF,
    "torch.detach": DETACH,
}
# tensor constructors that copy their data argument into a new leaf
REBUILD_FUNCS = COPY_FUNCS | {"torch.autograd.Variable", "torch.autograd.variable.Variable"}
# results with no history whatever the arguments
# NumPy arrays made from scratch: their arguments are shapes, ranges and seeds (the
# `numpy.random.` family, by prefix, is asked with :func:`fresh_call`)
NUMPY_FACTORIES = frozenset({"numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full",
                             "numpy.arange", "numpy.linspace", "numpy.eye", "numpy.identity"})
FRESH_FUNCS = FACTORY_FUNCS | NUMPY_FACTORIES | {"len", "range", "isinstance", "torch.is_tensor",
                                                 "torch.numel", "torch.nn.functional.one_hot"}


def fresh_call(qual: str) -> bool:
    """Whether a call of ``qual`` makes a value with no history whatever its arguments."""
    return qual in FRESH_FUNCS or qual.startswith("numpy.random.")
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
# keywords only a tokenizer's ``decode``/``batch_decode`` takes (Hugging Face's API): the call
# gives text, whoever's method it is (LMFlow's ``model.decode(ids, skip_special_tokens=True)``)
TEXT_DECODE_KWARGS = frozenset({"skip_special_tokens", "clean_up_tokenization_spaces"})
NON_TENSOR_KWARGS = frozenset({"reduction", "dim", "keepdim", "ignore_index", "dtype",
                               "device", "label_smoothing", "p", "eps", "reduce",
                               "size_average", "beta", "delta", "margin", "log_target",
                               "non_blocking", "axis", "num_classes",
                               # a resampling's settings: a shape, a factor, a mode
                               "size", "scale_factor", "mode", "align_corners"})
# The GT5 dependency walk (analysis.graph_deps.loads): results without a graph (detached,
# Python values, integer/bool results, sizes), calls of Python functions that give numbers,
# attributes that are no value of the tensor, a value's methods (the receiver flows into the
# result: the tensor methods that keep the receiver's kind, those of containers and strings),
# and calls spelled to make a new leaf from their argument (``Variable(t, requires_grad=True)``
# copies the data and drops the history, as ``.detach()`` does).
DETACHING_METHODS = NO_HISTORY_METHODS | INTEGER_METHODS | frozenset({
    "floor_divide", "numel", "size", "dim", "sign"})
NUMBER_FUNCS = frozenset({"float", "int", "bool", "len", "str", "round", "isinstance", "type",
                          "repr", "format", "range", "print"})
NON_VALUE_ATTRS = frozenset({"data", "grad", "shape", "dtype", "device", "ndim", "is_cuda"})
TENSOR_METHODS = SAME_KIND | {
    "max", "min", "argmax", "gather", "index_select", "masked_fill", "std", "var", "bmm", "mm",
    "view_as", "expand_as", "get", "items", "keys", "values", "pop", "format", "join", "append",
    "extend", "update"}
# methods that read their argument only for its shape or dtype (``mask.expand_as(td_error)``):
# the receiver flows into the result, the argument's values (and graph) do not
TEMPLATE_METHODS = frozenset({"expand_as", "view_as", "reshape_as", "type_as"})
LEAF_CALLS = frozenset({"Variable", "torch.autograd.Variable", "autograd.Variable",
                        "torch.tensor", "torch.as_tensor", "np.array", "numpy.array"})
# The GT2 sources (analysis.grad_sources): methods that ask for a gradient, methods that return the
# same tensor or a view of it (an inference tensor stays one), ops that save their inputs.
RG_METHODS = frozenset({"requires_grad_", "retain_grad"})
VIEW_OR_SAME = frozenset({"view", "view_as", "reshape", "squeeze", "unsqueeze", "permute",
                          "transpose", "t", "flatten", "expand", "narrow",
                          "contiguous", "detach", "select", "unflatten"})
SAVES_INPUT_FUNCS = frozenset({"matmul", "mm", "bmm", "einsum", "mul", "linear", "conv1d",
                               "conv2d", "conv3d", "baddbmm", "addmm"})
# name guesses (TARGET_RE, OBJECT_RE, INPUT_RE, model_spelling...): see analysis.vocabulary.
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


def detached_copy(e: ast.expr) -> bool:
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
        return frozenset(out | _packed_names(scope))
    return scope.ctx.memo("gt1-objects", scope.node, make)


def top_defs(ctx: Context) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions at the top of the file by name, built once. Of two ``def`` of one name the
    last counts: it is the one a call finds once the module has run."""
    def make() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
        out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        for s in ctx.tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[s.name] = s
        return out
    return ctx.memo("top-defs", ctx.tree, make)


# calls whose result is a (values, indices) pair when given a dim
PAIR_METHODS = frozenset({"max", "min", "topk", "sort", "kthvalue", "mode", "median"})
# methods that keep the cut chain (``x.detach().cpu().numpy()`` is one cut)
PEEL = frozenset({"detach", "cpu", "cuda", "to", "clone", "contiguous", "float", "double",
                  "half", "squeeze", "view", "reshape", "flatten", "data"})


def asks_grad(e: ast.Call) -> bool:
    """``requires_grad=<anything but False>`` among the keywords."""
    return any(k.arg == "requires_grad" and not (isinstance(k.value, ast.Constant)
                                                 and k.value.value is False) for k in e.keywords)


def graphless_no_grad(value: ast.AST | None) -> bool:
    """A value bound under ``torch.no_grad()`` holds no graph, unless it is made a leaf that
    requires grad there (``torch.zeros(3, requires_grad=True)``, ``nn.Parameter(t)``,
    ``t.requires_grad_()``: grad mode does not stop those)."""
    return value is not None and not any(
        isinstance(n, ast.Call) and (asks_grad(n) or (dotted(n.func) or "").endswith(
            "Parameter") or isinstance(n.func, ast.Attribute)
            and n.func.attr == "requires_grad_") for n in walk(value))


def unpacks_indices(s: ast.stmt, name: str, ctx: Context) -> bool:
    """``_, preds = torch.max(out, 1)``, ``v, idx = out.topk(k)``, ``v, idx = x.sort()``:
    ``name`` takes the indices of a (values, indices) pair, an integer tensor without history
    (a call that returns one tensor cannot be unpacked into two)."""
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Call)
            and isinstance(s.targets[0], ast.Tuple) and len(s.targets[0].elts) == 2):
        return False
    first, second = s.targets[0].elts
    if dotted(second) != name or dotted(first) == name:
        return False
    f = s.value.func
    qual = ctx.qualified_name(f) or ""
    return isinstance(f, ast.Attribute) and f.attr in PAIR_METHODS or \
        qual.startswith("torch.") and qual.rpartition(".")[2] in PAIR_METHODS


def indices_of_pair(e: ast.AST) -> bool:
    """``torch.max(out, dim=1).indices``, ``out.max(1)[1]``, ``x.topk(k)[1]``: the indices of a
    (values, indices) pair, an integer tensor without history (``max``/``min`` give a pair only
    with a dim: ``torch.max(a, b)`` is elementwise, ``x.max()`` one value)."""
    if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant) and e.slice.value == 1:
        call = e.value
    elif isinstance(e, ast.Attribute) and e.attr == "indices":
        call = e.value
    else:
        return False
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in PAIR_METHODS):
        return False
    if isinstance(e, ast.Attribute) or call.func.attr not in ("max", "min", "median"):
        return True  # only a pair has `.indices`
    extra = call.args[1:] if dotted(call.func.value) == "torch" else call.args
    return any(k.arg in ("dim", "keepdim") for k in call.keywords) or bool(extra) and isinstance(
        extra[0], ast.Constant) and type(extra[0].value) is int


def pair_source(v: ast.expr) -> ast.expr:
    """``out`` in ``torch.max(out, 1)`` and in ``out.max(1)``."""
    assert isinstance(v, ast.Call)
    f = v.func
    if isinstance(f, ast.Attribute) and dotted(f.value) != "torch" or not v.args:
        return f.value if isinstance(f, ast.Attribute) else v
    return v.args[0]


def peel(e: ast.expr) -> ast.expr:
    """The value under a chain of cut/copy methods: ``out`` for ``out.detach().cpu()``."""
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and \
                e.func.attr in PEEL:
            e = e.func.value
        elif isinstance(e, ast.Attribute) and e.attr == "data":
            e = e.value
        else:
            return e


# torch.nn.functional losses that do not end in `_loss`
F_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy",
                      "binary_cross_entropy_with_logits", "kl_div", "nll_loss"})


def is_functional_loss(qual: str) -> bool:
    """``torch.nn.functional.mse_loss``, ``...cross_entropy``: its first argument is the
    prediction."""
    last = qual.rpartition(".")[2]
    return qual.startswith("torch.nn.functional.") and ("loss" in last or last in F_LOSSES)


def is_loss_callee(ctx: Context, func: ast.expr) -> bool:
    """``F.cross_entropy``, ``nn.MSELoss()(...)`` instances by name, ``criterion``/``*loss``."""
    if isinstance(func, ast.Call):  # `nn.CrossEntropyLoss()(out, y)`: built and called at once
        return is_torch_loss(ctx.qualified_name(func.func))
    qual = ctx.qualified_name(func) or ""
    last = qual.rpartition(".")[2]
    if is_functional_loss(qual) or qual == "torch.nn.functional.cosine_similarity":
        return True
    return bool(last) and bool(LOSS_NAME_RE.search(last))


def pure_loss(t: Tracer, func: ast.expr) -> bool:
    """``criterion`` bound to a ``torch.nn.*Loss()`` (or named like a loss function)."""
    name = dotted(func)
    if name is None:
        return False
    hit = t._pure.get(name)
    if hit is None:
        hit = t._pure[name] = _pure_loss_name(t, name)
    return hit


def _pure_loss_name(t: Tracer, name: str) -> bool:
    """Bound to ``torch.nn.*Loss()``; a parameter passed one by the function's calls, not a
    module running a model (NOTE [passed callees]); or, when neither says, named like a loss
    function (``criterion``, ``focal_loss``). A user class bound to it may hold
    learnable weights (ArcFace, uncertainty weighting): then it is not pure."""
    ctx = t.ctx
    values = [unpacked_value(b, name) for b in t.scope.bindings.get(name, ())]
    where = t.scope  # (the scope the values are read in: NOTE [weightless callee])
    if not values:  # the module's, listed once per file (each function of a script asks)
        where = ctx.scope(ctx.tree)
        module: dict[str, list[ast.expr | None]] = ctx.memo(
            "origins-module-values", ctx.tree, dict)
        values = module.get(name)  # type: ignore[assignment]
        if values is None:
            values = module[name] = [unpacked_value(b, name) for b in
                                     ctx.scope(ctx.tree).bindings.get(name, ())]
    if not values and name.startswith("self.") and ctx.mentions(f"{name} ="):
        values = self_assignments(enclosing_class(ctx, t.scope.node), name, ctx)
    if not values:
        recv, _, last = name.rpartition(".")
        info = ctx.analysis.class_of(t.scope.node) if recv == "self" else None
        if info is not None and _reads_self(info.node, last):
            return False  # `self._compute_loss(x, y)` runs `self.forward`: the model's own
        if last[:1].isupper() and any(ch.islower() for ch in last):
            return False  # `EntropyLoss(after_softmax=...)` builds a loss object
        if recv and recv not in ("self", "cls") and \
                recv.partition(".")[0] not in ctx.imports.aliases and \
                not LOSS_CALLABLE_RE.match(recv.rpartition(".")[2]):
            return False  # `self.value_function.compute_loss(x, y)`: the model's method
        if not recv:  # a parameter: what the function's calls pass (NOTE [passed callees])
            from gradtrace.lint.analysis.passed_callees import passed_runs_model
            runs = passed_runs_model(ctx, t.scope.node, name)
            if runs is not None:
                return not runs
            if weightless_parameter(t, name):
                return True
        return bool(LOSS_CALLABLE_RE.match(last))
    if all(isinstance(v, (ast.Name, ast.Attribute)) and dotted(v) not in (None, name)
           for v in values):  # `criterion = cal_loss`: an alias is the function it names
        t._pure[name] = False  # (while answering: a cycle of aliases is no loss)
        return all(pure_loss(t, v) for v in values)  # type: ignore[arg-type]
    return all(isinstance(u := _unmoved(v), ast.Call) and is_torch_loss(
        ctx.qualified_name(u.func)) or weightless_value(t, v, where) for v in values)


def _reads_self(cls: ast.ClassDef | None, method: str) -> bool:
    """The class's method ``method`` reads ``self`` (its layers, parameters, other methods)."""
    m = next((f for f in (cls.body if cls is not None else ()) if isinstance(
        f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == method), None)
    return m is not None and any(isinstance(n, ast.Name) and n.id == "self" and isinstance(
        n.ctx, ast.Load) for b in m.body for n in ast.walk(b))


def _unmoved(v: ast.expr | None) -> ast.expr | None:
    """``nn.CrossEntropyLoss()`` for ``nn.CrossEntropyLoss().cuda(gpu)`` / ``.to(device)``."""
    while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in MOVES:
        v = v.func.value
    return v


def is_loss_class(cls: ast.ClassDef | None, ctx: Context) -> bool:
    """A class named like a loss (``FocalLoss``, ``Criterion``) or deriving from a torch loss
    class (``torch.nn.modules.loss._Loss``, ``nn.MSELoss``): its ``forward`` returns a loss.
    Not a custom autograd operation (``class TverskyLoss(Function)``): its ``forward`` runs
    without grad and its ``backward`` gives the gradient, whatever ``forward`` computes."""
    if cls is None:
        return False
    quals = [ctx.qualified_name(b) or "" for b in cls.bases]
    if any(q in AUTOGRAD_FUNCTION_BASES for q in quals):
        return False
    return cls.name.lower().endswith(("loss", "criterion")) or any(
        is_torch_loss(q) for q in quals)


def self_assignments(cls: ast.ClassDef | None, name: str, ctx: Context) -> list[ast.expr | None]:
    """Values assigned to ``self.<attr>`` anywhere in the methods of ``cls``."""
    if cls is None:
        return []
    # cached per file: a module-level cache would keep whole class subtrees alive (NOTE [gc])
    found = ctx.memo("gt1-self-assignments", cls, lambda: _attribute_assignments(cls))
    return list(found.get(name, ()))


def _attribute_assignments(cls: ast.ClassDef) -> dict[str, tuple[ast.expr, ...]]:
    """``{"self.x": (value, ...)}`` for every attribute assignment in ``cls`` (one walk)."""
    out: dict[str, list[ast.expr]] = {}
    for n in statements(cls):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                pairs = zip(t.elts, n.value.elts) if isinstance(t, ast.Tuple) and isinstance(
                    n.value, ast.Tuple) and len(t.elts) == len(n.value.elts) else [(t, n.value)]
                for tt, v in pairs:  # `self.a, self.b = a, b` pairs them up
                    name = dotted(tt) if isinstance(tt, ast.Attribute) else None
                    if name is not None:
                        out.setdefault(name, []).append(v)
    return {k: tuple(v) for k, v in out.items()}


def constant_default_args(cls: ast.ClassDef | None) -> set[str]:
    """Arguments of the methods of ``cls`` whose default is a number (hyper-parameters)."""
    out: set[str] = set()
    for f in cls.body if cls is not None else ():
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = f.args
            pos = [*a.posonlyargs, *a.args]
            pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
                     *zip(a.kwonlyargs, a.kw_defaults)]
            out.update(arg.arg for arg, d in pairs if isinstance(d, ast.Constant)
                       and isinstance(d.value, (int, float)) and not isinstance(d.value, bool))
    return out


def registered_buffer(cls: ast.ClassDef, attr: str) -> bool:
    """``self.register_buffer('<attr>', ...)`` in a method of ``cls``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == "register_buffer" and dotted(n.func.value) == "self"
               and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == attr
               for n in bfs_walk(cls))


def map_cut_kind(f: ast.expr, ctx: Context) -> str | None:
    """The cut kind of a function handed to ``map``: ``torch.detach``, ``lambda t:
    t.detach()``, ``Tensor.detach``."""
    q = ctx.qualified_name(f) or ""
    if q in CUT_FUNCS:
        return CUT_FUNCS[q]
    if q in ("torch.Tensor.detach", "torch.Tensor.item"):
        return CUT_METHODS.get(q.rpartition(".")[2])
    if isinstance(f, ast.Lambda) and len(f.args.args) == 1 and isinstance(f.body, ast.Call) \
            and isinstance(f.body.func, ast.Attribute) and not f.body.args \
            and dotted(f.body.func.value) == f.args.args[0].arg:
        return CUT_METHODS.get(f.body.func.attr)
    return None
