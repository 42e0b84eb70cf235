"""GT420-GT421: weights a module makes or copies where `parameters()` never sees them."""
from __future__ import annotations

import ast
import re
from typing import Iterator

from dataclasses import replace

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis import ClassInfo
from gradtrace.lint.analysis.kinds import MODULE, OPTIMIZER, REGISTERED
from gradtrace.lint.analysis.param_attrs import forward_methods as _forward_methods
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.nodes import of_types, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._grad_buffers import grad_buffers
from gradtrace.lint.rules.registration._modules import (
    SELF_RETURNING, module_classes, owns_params, pretrained_root, statements,
)
from gradtrace.lint.rules.registration.attributes import (
    _made_trainable, _optimizer_calls, _weight_uses,
)

# torch.nn layers whose weights are drawn at random when built (norm layers start at 1/0)
RANDOM_LAYER_RE = re.compile(
    r"^(Lazy)?(Linear|Bilinear|Conv\w*|Embedding\w*|RNN|LSTM|GRU|RNNCell|LSTMCell|GRUCell|"
    r"MultiheadAttention|Transformer\w*)$")


def _random_layer(e: ast.AST, ctx: Context) -> bool:
    """A call that builds a layer with randomly initialised weights: ``nn.Linear(...)``
    (through ``.to(device)``), or a class of this file that owns parameters."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in SELF_RETURNING:
        e = e.func.value
    if not isinstance(e, ast.Call) or not owns_params(e, ctx, buffers_count=False) \
            or pretrained_root(e, ctx):
        return False
    q = ctx.call_name(e) or ""
    if q.startswith("torch.nn."):
        return bool(RANDOM_LAYER_RE.match(q.rpartition(".")[2]))
    return isinstance(e.func, ast.Name) and e.func.id in module_classes(ctx)


def _built_and_called(m: ast.FunctionDef | ast.AsyncFunctionDef, ctx: Context
                      ) -> Iterator[ast.Call]:
    """Layer constructions in ``m`` whose result is only called there: ``nn.Linear(a, b)(x)``,
    or ``fc = nn.Linear(a, b)`` with every later read of ``fc`` a call ``fc(x)``."""
    locals_: dict[str, ast.Call] = {}
    for s in statements(m):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], ast.Name) and _random_layer(s.value, ctx):
            locals_[s.targets[0].id] = s.value  # type: ignore[assignment]
    called: set[str] = set()
    other: set[str] = set()
    callee_ids: set[int] = set()
    for n in of_types(m, (*FUNCTION_TYPES, ast.Lambda, ast.Call)):
        if isinstance(n, (*FUNCTION_TYPES, ast.Lambda)) and n is not m:
            return  # nested functions may keep the layer: too uncertain
        if isinstance(n, ast.Call):
            if _random_layer(n.func, ctx):
                yield n.func  # type: ignore[misc]
            if isinstance(n.func, ast.Name) and n.func.id in locals_:
                called.add(n.func.id)
                callee_ids.add(id(n.func))
    names = of_types(m, (ast.Name,))
    for n in names:
        if n.id in locals_ and isinstance(n.ctx, ast.Load) and id(n) not in callee_ids:
            other.add(n.id)
    bound = [n for n in names if isinstance(n.ctx, ast.Store)]
    twice = {n.id for n in bound if sum(b.id == n.id for b in bound) > 1}
    for name, ctor in locals_.items():
        if name in called and name not in other and name not in twice:
            yield ctor


class LayerBuiltInForward(Rule):
    """A layer with weights is built inside `forward`: it is new at every call and never trained.

    Why: `torch.nn.Linear(d_in, d_out)(x)` in `forward` creates a new layer with freshly drawn
    random weights on every call. It is not an attribute of the module, so it is not registered
    (NOTE [registration]): `parameters()` never holds it, the optimizer never updates it, and
    when the module builds all its layers this way `torch.optim.SGD(model.parameters())` raises
    `ValueError: optimizer got an empty parameter list` (verified on torch 2.13). Build the
    layer once in `__init__` (`self.fc = nn.Linear(d_in, d_out)`) and call `self.fc(x)`.
    Known limits: only layers whose weights start at random (`Linear`, `Conv*`, `Embedding`,
    recurrent and attention layers, classes of the file that own parameters), built in
    `forward` or a method it calls, and only called there (a layer stored on `self`,
    returned or handed to another call is left alone), in a file that trains (builds an
    optimizer or calls `backward()`).
    """

    code = "GT420"
    needs_step = True  # NOTE [step files]
    gate_statements = True  # a class that defines `forward` holds the word
    name = "layer-built-in-forward"
    message = ("`{layer}` is built inside `{method}`: a new layer with random weights at every "
               "call, not registered on the module, so `parameters()` never holds it and the "
               "optimizer never trains it; build it once in `__init__` and call it here")
    triggers = ("forward",)
    examples = [
        Bad("""
            import torch
            class ThreeLayerNet(torch.nn.Module):
                def __init__(self, d_in, h, d_out):
                    super().__init__()
                    self.d_in, self.h, self.d_out = d_in, h, d_out
                def forward(self, x):
                    h = torch.nn.Linear(self.d_in, self.h)(x).clamp(min=0)
                    return self.head(h)
                def head(self, h):
                    out = torch.nn.Linear(self.h, self.d_out).to(h.device)
                    return out(h)
            model = ThreeLayerNet(4, 8, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            """, at=(7, 12), count=2),
        Bad("""
            import torch.nn as nn
            class ThreeLayerNet(nn.Module):
                def forward(self, x):
                    h = nn.Linear(10, 8)(x).clamp(min=0)
                    h = nn.Linear(8, 8)(h).clamp(min=0)
                    return nn.Linear(8, 2)(h)
            def train(model, x, y):
                ((model(x) - y) ** 2).mean().backward()
            """, at=(4, 12)),
        Good("""
            import torch
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self, d_in, h):
                    super().__init__()
                    self.fc = nn.Linear(d_in, h)
                    self.proj = None
                def forward(self, x):
                    x = nn.ReLU()(self.fc(x))
                    x = nn.LayerNorm(x.shape[-1:], elementwise_affine=False)(x)
                    if self.proj is None:
                        self.proj = nn.Linear(x.shape[-1], 1)
                    return self.proj(x)
                def _probe_shape(self, d):
                    return nn.Conv2d(3, d, 3)(torch.zeros(1, 3, 8, 8)).shape
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module \
                or not ctx.mentions("optim", ".backward("):
            return  # a file that trains nothing (a test fixture's odd model) is not judged
        for m in _forward_methods(cls):
            ctors = sorted(_built_and_called(m, ctx), key=lambda c: (c.lineno, c.col_offset))
            if not ctors:
                continue
            first = ctors[0]
            rel = [Related(ctx.path, c.lineno, f"`{ctx.source(c.func)}(...)` is built here too",
                           ctx.column(c)) for c in ctors[1:]]
            yield self.report(first, ctx, related=rel, layer=ctx.source(first.func) + "(...)",
                              method=m.name)


# where a plain tensor copied from trained weights comes from
LOADS = frozenset({"torch.load", "torch.from_numpy", "numpy.load"})
TENSOR_VIEWS = frozenset({"view", "reshape", "t", "clone", "detach", "to", "cuda", "float",
                          "contiguous", "permute", "transpose", "squeeze", "unsqueeze", "numpy"})


def _copied_weight(value: ast.expr | None, init: ast.AST, ctx: Context) -> str | None:
    """How ``value`` (in ``__init__``) is a plain tensor copied from saved or trained weights:
    ``sd['conv1.weight'].view(...)`` where ``sd = other.state_dict()``, ``torch.load(...)``,
    ``other.fc.weight.data`` / ``.detach()`` / ``.clone()``; None otherwise."""
    e, views = value, []
    while True:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in TENSOR_VIEWS:
            views.append(e.func.attr)
            e = e.func.value
        elif isinstance(e, ast.Attribute) and e.attr == "data":
            views.append("data")
            e = e.value
        elif isinstance(e, ast.Subscript):
            e = e.value
        else:
            break
    if isinstance(e, ast.Call) and (ctx.call_name(e) or "") in LOADS:
        return f"`{ctx.source(e.func)}(...)`"
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr == "state_dict":
        return "a `state_dict()`"
    if isinstance(e, ast.Name):
        b = ctx.scope(init).binding_before(e.id, getattr(value, "lineno", 0))
        v = b.value if b is not None else None
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
                and v.func.attr == "state_dict":
            return f"`{ctx.source(v)}`"
        if isinstance(v, ast.Call) and (ctx.call_name(v) or "") in LOADS:
            return f"`{ctx.source(v.func)}(...)`"
    if isinstance(e, ast.Attribute) and e.attr in ("weight", "bias") and views:
        return f"`{ctx.source(e)}`"  # `.data`/`.detach()`/`.view()` of another layer's weight
    return None


BUFFERS = ("the optimizer is built over `parameters()` of `{cls}`, whose weights {names} are "
           "buffers that require grad: `parameters()` does not yield buffers, so the optimizer "
           "never updates them (`ValueError: optimizer got an empty parameter list` when they "
           "are all it has); give it the tensors themselves, or register them as Parameters")


class WeightsCopiedAsPlainTensors(Rule):
    """A module keeps weights copied from a checkpoint or another model as plain tensors: it
    has no parameters.

    Why: `self.w = pretrained.state_dict()['conv1.weight'].view(10, 25)` (or
    `torch.load(...)`, `other.fc.weight.data`) stores an ordinary tensor, not an `nn.Parameter`
    (NOTE [registration]): state-dict entries are detached, and a view or `.data` of another
    layer's weight is not registered either. A module whose weights are all such tensors has no
    parameters: `torch.optim.SGD(model.parameters())` raises `ValueError: optimizer got an
    empty parameter list` (verified on torch 2.13), and with other parameters present these
    weights never train. Wrap them: `self.w = nn.Parameter(sd['conv1.weight'].view(10, 25)
    .clone())`.
    Weights registered as buffers that require grad (`self.register_buffer('weight',
    w.clone().requires_grad_())`, a meta-learning layer's design) are the same case seen from
    the optimizer: it is reported on the optimizer built over `model.parameters()`
    (NOTE [weights kept as buffers]), the line to change (give it the model's own list of those
    tensors).
    Known limits: only a module class of the file that registers nothing else (no submodule,
    parameter or buffer), whose copied tensor is used as a weight in `forward` (`@`, `matmul`,
    `F.linear`/`conv`), and whose instances' `parameters()` are given to an optimizer in the
    file; buffers count when made to require grad where they are registered.
    """

    code = "GT421"
    name = "weights-copied-as-plain-tensors"
    message = ("`self.{attr}` is a plain tensor copied from {source}, used as a weight in "
               "`forward` (line {line}); `{cls}` registers no parameter, so the optimizer built "
               "over its `parameters()` (line {opt_line}) gets none: wrap it in `nn.Parameter`")
    triggers = ("optim",)
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Decomposed(nn.Module):
                def __init__(self, pretrained):
                    super().__init__()
                    params = pretrained.state_dict()
                    self.w = params['conv1.weight'].view(10, 25)
                    self.b = params['conv1.bias']
                def forward(self, x):
                    return self.w @ F.unfold(x, 5) + self.b[:, None]
            model = Decomposed(nn.Sequential())
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            """, at=(8, 8)),
        Bad("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class FastLinear(nn.Module):
                def __init__(self, n, m):
                    super().__init__()
                    self.register_buffer("weight", torch.randn(m, n).requires_grad_())
                def forward(self, x):
                    return F.linear(x, self.weight)
            model = FastLinear(4, 2)
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            """, at=(11, 6)),
        Good("""
            import torch
            import torch.nn as nn
            import torch.nn.functional as F
            class Decomposed(nn.Module):
                def __init__(self, pretrained):
                    super().__init__()
                    params = pretrained.state_dict()
                    self.w = nn.Parameter(params['conv1.weight'].view(10, 25).clone())
                    self.pca = torch.load("pca.pt")
                    self.head = nn.Linear(10, 2)
                def forward(self, x):
                    return self.head((self.w @ F.unfold(x, 5)).mean(-1) @ self.pca)
            model = Decomposed(nn.Sequential())
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        an = ctx.analysis
        built: dict[str, ast.Call] = {}
        for owner, call in _built_optimizers(ctx):
            for n in walk(call):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr == "parameters":
                    k = an.kind_in(n.func.value, owner, call.lineno)
                    if k is not None and k.what == MODULE and k.cls:
                        built.setdefault(k.cls, call)
        for name, call in built.items():
            cls = an.classes.get(name)
            if cls is None or not cls.is_module or "__init__" not in cls.methods:
                continue
            held = grad_buffers(ctx, name)
            if held:  # NOTE [weights kept as buffers]: the optimizer's argument is the slip
                f = self.report(call, ctx, related=tuple(Related(
                    ctx.path, st.lineno, f"`{c}.{a}` is a buffer that requires grad",
                    ctx.column(st)) for c, a, st in held[:3]), attr="", source="", line=0,
                    cls=name, opt_line=call.lineno)
                yield replace(f, message=BUFFERS.format(cls=name, names=", ".join(
                    f"`{c}.{a}`" for c, a, _ in held[:4])))
                continue
            found = self._candidates(cls, ctx)
            if not found:
                continue
            for attr, use in _weight_uses(cls, set(found), ctx):
                info, source = found[attr]
                yield self.report(info.stmt, ctx, related=(Related(
                    ctx.path, use.lineno, f"`self.{attr}` is used as a weight here",  # type: ignore[attr-defined]
                    ctx.column(use)),), attr=attr, source=source, line=use.lineno,  # type: ignore[attr-defined]
                    cls=name, opt_line=call.lineno)

    @staticmethod
    def _candidates(cls: ClassInfo, ctx: Context) -> dict[str, tuple]:
        """attr -> (AttrInfo, source) of the copied weights, or {} when the class registers
        (or may register) anything."""
        init = cls.methods["__init__"]
        for b in cls.node.bases:
            if ctx.qualified_name(b) != "torch.nn.Module":
                return {}
        for n in walk(cls.node):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                    "register_parameter", "register_buffer", "add_module", "register_module"):
                return {}
        out = {}
        for name, info in cls.attrs.items():
            source = _copied_weight(info.value, init, ctx) if info.method is init else None
            if source is not None and not info.later:
                out[name] = (info, source)
                continue
            k = cls.attr_kind(name)
            if k is None and isinstance(info.value, ast.Constant):
                continue
            if k is None or k.what in REGISTERED or info.buffer:
                return {}
        trainable = _made_trainable(ctx, set(out))
        return {n: v for n, v in out.items() if n not in trainable}


def _built_optimizers(ctx: Context) -> Iterator[tuple[ast.AST, ast.Call]]:
    """(enclosing function or module, call) for every optimizer built in the file: a
    ``torch.optim`` class called, or a function's parameter that its callers give such a class
    (``opt_class(model.parameters(), lr=lr)``: NOTE [optimizer class given])."""
    for owner, call, _ in _optimizer_calls(ctx):
        yield owner, call
    an = ctx.analysis
    for fn in of_types(ctx.tree, FUNCTION_TYPES):
        a = fn.args  # type: ignore[attr-defined]
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        for n in of_types(fn, (ast.Call,)):
            if isinstance(n.func, ast.Name) and n.func.id in params \
                    and ctx.scope(fn).binding_before(n.func.id, n.lineno) is None:
                k = an.kind_in(n, fn, n.lineno)
                if k is not None and k.what == OPTIMIZER:
                    yield fn, n
