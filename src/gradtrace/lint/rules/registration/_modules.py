"""Shared facts for GT4xx: which classes are modules, which calls build modules, and where a
function freezes or unfreezes parameters. Pure functions of the tree (cached per file/scope)."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gradtrace.lint.analysis.vocabulary import MODEL_FACTORIES, PARAM_LIKE_RE
from gradtrace.lint.analysis.kinds import OPTIMIZER
from gradtrace.lint.analysis.params import module_ctor
from gradtrace.lint.flow import MODULE
from gradtrace.lint.names import dotted
from gradtrace.lint.rules.registration._numbers import stores_number as a_number
from gradtrace.lint.rules.leaf._tensors import is_optimizer_call
from gradtrace.lint.nodes import of_types, statements, walk  # noqa: F401 (statements: re-exported)

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.flow import Scope

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


def pretrained_root(node: ast.AST, ctx: Context) -> bool:
    """A call loading a pretrained model (torchvision/timm factory, ``*Model.from_pretrained``)."""
    if not isinstance(node, ast.Call):
        return False
    q = ctx.call_name(node) or ""
    return module_ctor(node, ctx) and (q.startswith(MODEL_FACTORIES) or q.endswith(
        ".from_pretrained"))


def owns_params(node: ast.AST, ctx: Context, buffers_count: bool = True) -> bool:
    """Whether a module-building call surely or probably creates parameters (not
    ``buffers_count``: a class of the file holding buffers, numbers and plain objects only
    creates none: ``param_free_classes``)."""
    if not module_ctor(node, ctx):
        return False
    assert isinstance(node, ast.Call)
    q = ctx.call_name(node) or ""
    last = q.rpartition(".")[2]
    if isinstance(node.func, ast.Name) and node.func.id in module_classes(ctx):
        return node.func.id not in stateless_classes(ctx) and (
            buffers_count or node.func.id not in param_free_classes(ctx))
    if not q.startswith("torch.nn."):
        return True
    if q in ("torch.nn.Sequential", "torch.nn.ModuleList"):
        return any(isinstance(a, ast.Starred) or owns_params(a, ctx) for a in node.args) or \
            any(isinstance(a, (ast.List, ast.ListComp)) for a in node.args)
    return bool(PARAM_LAYER_RE.match(last))


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
                        _owning_ctor(n, stateless, ctx):
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
                if isinstance(v, ast.Call) and not _plain_value_call(v, stateless, ctx):
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

    def plain(e: ast.AST, names: bool = True) -> bool:
        if isinstance(e, (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Compare)):
            return True
        if isinstance(e, ast.Call):
            return _plain_value_call(e, stateless, ctx, depth)
        if names and isinstance(e, ast.Name) and e.id in binds:
            return all(plain(x, False) for x in binds[e.id])
        return False
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


def is_module_expr(scope: Scope, expr: ast.AST, line: int) -> bool:
    """Whether ``expr`` (a name or ``self.x``) holds a module at ``line``."""
    if scope.kind(expr, line) == MODULE:
        return True
    name = dotted(expr)
    if name is None:
        return False
    root, _, attr = name.rpartition(".")
    if root and "." not in root and not PARAM_LIKE_RE.search(attr):
        rb = scope.binding_before(root, line)
        if rb is not None and rb.value is not None and pretrained_root(_strip(rb.value), scope.ctx):
            return True  # `model.encoder` of a pretrained model: a submodule
    b = scope.binding_before(name, line)
    if b is not None and b.value is not None:
        return module_ctor(_strip(b.value), scope.ctx)
    if b is not None and isinstance(b.stmt, (ast.For, ast.AsyncFor)):
        return _iterates_modules(b.stmt, name)
    return False


SELF_RETURNING = frozenset({"to", "cuda", "cpu", "train", "eval", "float", "double", "half",
                            "bfloat16", "requires_grad_", "apply", "type"})


def _strip(e: ast.AST) -> ast.AST:
    """``Net()`` for ``Net().to(device).eval()`` (module methods that return self)."""
    while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
            and e.func.attr in SELF_RETURNING:
        e = e.func.value
    return e


def _iterates_modules(loop: ast.For | ast.AsyncFor, name: str) -> bool:
    it = loop.iter
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)):
        return False
    m = it.func.attr
    if m in ("modules", "children") and dotted(loop.target) == name:
        return True
    t = loop.target
    return m in ("named_modules", "named_children") and isinstance(t, ast.Tuple) \
        and len(t.elts) == 2 and dotted(t.elts[1]) == name


def covers(root: str, name: str) -> bool:
    """Whether the parameters of ``root`` include those of ``name`` (same or a submodule)."""
    return name == root or name.startswith(root + ".")


def param_sources(call: ast.AST) -> set[str]:
    """Dotted receivers of ``.parameters()`` / ``.named_parameters()`` inside ``call``."""
    out: set[str] = set()
    for n in walk(call):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("parameters", "named_parameters"):
            r = dotted(n.func.value)
            if r:
                out.add(r)
    return out


@dataclass(frozen=True)
class OptimizerBuild:
    """``opt = torch.optim.X(<params>)`` in a scope."""

    name: str
    stmt: ast.stmt
    call: ast.Call
    sources: frozenset[str]


def optimizer_builds(scope: Scope) -> list[OptimizerBuild]:
    """Optimizer constructions bound to a name in this scope, in source order (cached)."""
    def make() -> list[OptimizerBuild]:
        out = []
        for name, bs in scope.bindings.items():
            for b in bs:
                v = b.value
                if isinstance(v, ast.Call) and is_optimizer_call(v, scope.ctx):
                    srcs = set(param_sources(v))
                    first = v.args[0] if v.args else None
                    if isinstance(first, ast.Name):
                        pb = scope.binding_before(first.id, b.line)
                        if pb is not None and pb.value is not None:
                            srcs |= param_sources(pb.value)
                    out.append(OptimizerBuild(name, b.stmt, v, frozenset(srcs)))
                elif isinstance(v, ast.Call) and \
                        scope.ctx.analysis.local_callee(v, scope, b.line) is not None:
                    k = scope.ctx.analysis.kind(v, scope, b.line)  # a helper of the file
                    if k is not None and k.what == OPTIMIZER and k.over:
                        out.append(OptimizerBuild(name, b.stmt, v, k.over))
        return sorted(out, key=lambda o: o.stmt.lineno)
    return scope.ctx.memo("gt4-optimizers", scope.node, make)


def step_lines(scope: Scope, opt: str) -> list[int]:
    """Lines of ``opt.step(...)`` calls (also ``scaler.step(opt)``)."""
    out = [m.stmt.lineno for m in scope.calls_to("step") if m.receiver == opt]
    out += [m.stmt.lineno for m in scope.calls_to("step")
            if m.call.args and dotted(m.call.args[0]) == opt]
    out += [line for line, _ in handed_to_steppers(scope, opt)]
    out += global_steppers(scope, opt)
    return sorted(out)


def handed_to_steppers(scope: Scope, opt: str) -> list[tuple[int, ast.Call]]:
    """(line, call) of calls handing ``opt`` to a function of the file that steps it
    (``train(model, opt, loader)`` where ``train`` calls ``opt.step()``)."""
    an = scope.ctx.analysis
    out = []
    for n in walk(scope.node) if scope.ctx.mentions(opt) else ():
        if not isinstance(n, ast.Call) or not any(dotted(a) == opt for a in
                                                  [*n.args, *(k.value for k in n.keywords)]):
            continue
        st = scope.statement_of(n)
        if st is None:
            continue
        fn = an.local_callee(n, scope, st.lineno)
        if fn is None:
            continue
        stepped = an.stepped_params(fn)
        if any(dotted(v) == opt and p in stepped for p, v in an.arguments(fn, n).items()):
            out.append((st.lineno, n))
    return out


def global_steppers(scope: Scope, opt: str) -> list[int]:
    """Lines of a script calling a function of the file that steps the script's ``opt``
    itself (``def train(): ... optimizer.step()`` called as ``train(...)``)."""
    ctx = scope.ctx
    if scope.node is not ctx.tree or not ctx.mentions(f"{opt}.step("):
        return []
    an = ctx.analysis
    out = []
    for st in scope.stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for n in walk(st):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                fn = an.local_callee(n, scope, st.lineno)
                if fn is not None and opt in an.stepped_globals(fn):
                    out.append(n.lineno)
                    break
    return out


def rebound_between(scope: Scope, name: str, start: int, end: int) -> bool:
    return any(start < b.line < end for b in scope.bindings.get(name, ()))


def stale_across_methods(ctx: Context, fn: ast.AST, target: str, line: int,
                         init_too: bool = False) -> tuple[OptimizerBuild, ast.stmt] | None:
    """For ``self.x = <new module>`` at ``line`` in method ``fn``: the optimizer ``__init__``
    built over ``self.x``'s parameters and a statement of another method that steps it, when
    no method but ``__init__`` builds an optimizer or adds a parameter group, and ``__init__``
    never calls ``fn`` (a set-up method); ``init_too``: ``fn`` may be ``__init__`` itself
    (its re-creation after the build)."""
    an = ctx.analysis
    cls = an.class_of(fn)
    init = cls.methods.get("__init__") if cls is not None else None
    if cls is None or init is None or fn is init and not init_too or \
            not ctx.mentions("optim"):
        return None
    builds = [b for b in optimizer_builds(ctx.scope(init)) if b.name.startswith("self.")]
    if any(b.name.startswith("self.") for m in cls.methods.values() if m is not init
           for b in optimizer_builds(ctx.scope(m))):
        return None  # an optimizer is (re)built elsewhere: maybe after this re-creation
    build = next((b for b in builds if any(covers(target, s) or covers(s, target)
                                           for s in b.sources)), None)
    if build is None:
        return None
    name = getattr(fn, "name", "")
    for m in cls.methods.values():
        for n in walk(m):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    n.func.attr == "add_param_group":
                return None
            if m is init and isinstance(n, ast.Call) and dotted(n.func) == f"self.{name}":
                return None  # `__init__` calls it: it builds the model before the optimizer
    for m in cls.methods.values():
        if m is init:
            continue
        sc = ctx.scope(m)
        for ln in step_lines(sc, build.name):
            st = next((s for s in sc.stmts if s.lineno == ln), None)
            if st is not None and not (m is fn and ln < line):
                return build, st
    return None
