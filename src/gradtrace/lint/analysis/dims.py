"""Which dimensions of a tensor the file shows to have size one (shared by GT762, GT763).

# NOTE [singleton dims]
A small, honest shape reader: for an expression it answers "these dimension indices have
size 1" and, when the file shows it, the rank. Indices are kept as the code spells them: a
non-negative index counts from the front, a negative one from the back; the two are related
only when the rank is known (``Dims.has_one``). What makes a size-one dimension:

- a layer whose output features/channels are 1: ``nn.Linear(k, 1)`` (its last dim),
  ``nn.ConvNd(c, 1, ...)`` (dim ``-(N+1)``; dim 1 only when the input is shown batched), called
  as a name, a ``self`` attribute, or the last such layer of an ``nn.Sequential`` followed only
  by layers that keep the shape (activations, dropout, norms);
- ``x @ w`` with ``w`` a ``(k, 1)`` parameter or factory tensor (its last dim);
- ``unsqueeze(d)``, a reduction over ``d`` with ``keepdim=True``, ``view``/``reshape``/a factory
  with a literal 1 among its sizes.

Ops that keep the shape (element-wise functions, casts, arithmetic with a Python number) carry
the answer through; ``transpose``/``permute`` move it; ``view``/``reshape``/``cat`` give the rank.
Anything else (arithmetic between two tensors, which may broadcast the 1 away, ``squeeze``,
indexing, a function's parameter) is unknown, and unknown is silent.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from gradtrace.lint.analysis.kinds import BUFFER, MODULE, NUMBER, PARAMETER, TENSOR
from gradtrace.lint.analysis.module_results import SEQUENTIAL
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope

MAX_DEPTH = 8
LINEAR = frozenset({"torch.nn.Linear", "torch.nn.modules.linear.Linear"})
CONV = {f"torch.nn.Conv{n}d": n for n in (1, 2, 3)}
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin",
                             "torch.nn.modules.activation.Softmax",
                             "torch.nn.modules.activation.LogSoftmax"})
# layers whose output has the shape of their input
SHAPE_KEEPING = frozenset(f"torch.nn.{n}" for n in (
    "ReLU", "ReLU6", "Tanh", "Sigmoid", "GELU", "SiLU", "Mish", "LeakyReLU", "ELU", "SELU",
    "CELU", "PReLU", "Softplus", "Hardtanh", "Hardswish", "Hardsigmoid", "Tanhshrink",
    "Softsign", "LogSigmoid", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
    "Identity", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
    "InstanceNorm2d", "GroupNorm")) | SOFTMAX_MODULES
# tensor methods / torch functions whose result has the shape of their first tensor
ELEMENTWISE = frozenset({
    "float", "double", "half", "bfloat16", "contiguous", "clone", "to", "cuda", "cpu",
    "type_as", "abs", "neg", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "silu", "elu",
    "leaky_relu", "softplus", "sqrt", "rsqrt", "sin", "cos", "pow", "mul", "div", "add", "sub",
    "clamp", "clip", "dropout", "softmax", "log_softmax", "logsigmoid",
    "hardtanh", "square", "sign", "mish", "selu", "celu", "relu6", "detach"})
# of those, the ones whose other arguments may be tensors that broadcast: kept only when the
# other positional arguments are Python numbers
BINARY = frozenset({"pow", "mul", "div", "add", "sub", "clamp", "clip"})
KEEPDIM_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "logsumexp", "norm", "prod",
                                "std", "var", "nansum", "nanmean", "median"})
FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full"})
RESHAPES = frozenset({"view", "reshape"})


@dataclass(frozen=True)
class Dims:
    """What the file shows about a tensor's shape: its rank (None: unknown), a lower bound
    on the rank, and dimension indices of size 1 (as spelled: negative from the back)."""

    rank: int | None = None
    min_rank: int = 0
    ones: frozenset[int] = frozenset()

    def norm(self, d: int) -> int | None:
        """``d`` as a non-negative index, when that is known."""
        if d >= 0:
            return d
        return d + self.rank if self.rank is not None and d + self.rank >= 0 else None

    def has_one(self, d: int) -> bool:
        """Whether dimension ``d`` is known to have size 1."""
        if d in self.ones:
            return True
        if self.rank is None:
            return False
        other = d - self.rank if d >= 0 else d + self.rank
        return other in self.ones and (d < self.rank if d >= 0 else -d <= self.rank)

    def with_rank(self, rank: int | None) -> Dims:
        if rank is None:
            return self
        ones = frozenset(x for d in self.ones for x in (d, d - rank if d >= 0 else d + rank)
                         if -rank <= x < rank)
        return Dims(rank, rank, ones)


def int_value(e: ast.AST | None) -> int | None:
    """A literal int (``2``, ``-1``), else None."""
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = int_value(e.operand)
        return -v if v is not None else None
    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword ``name`` of ``call``."""
    return next((k.value for k in call.keywords if k.arg == name), None)


def arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    """The argument at ``pos`` or keyword ``name`` of ``call``."""
    if len(call.args) > pos and not any(isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
        return call.args[pos]
    return keyword(call, name)


def _sizes(call: ast.Call, first: int = 0) -> list[ast.expr] | None:
    """The sizes of ``view(a, b, 1)`` / ``view((a, b, 1))`` / ``torch.zeros(a, 1)``."""
    args = call.args[first:]
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if not args or any(isinstance(a, ast.Starred) for a in args):
        return None
    return list(args)


def _from_sizes(sizes: list[ast.expr]) -> Dims:
    n = len(sizes)
    return Dims(n, n, frozenset(x for i, s in enumerate(sizes) if int_value(s) == 1
                                for x in (i, i - n)))


class ShapeReader:
    """Reads :class:`Dims` of expressions in one file (NOTE [singleton dims])."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # -- numbers -------------------------------------------------------------------------
    def is_number(self, e: ast.AST, scope: Scope, line: int) -> bool:
        """A Python number: a literal, a name the analysis knows as one, arithmetic of them,
        ``math.*`` of them."""
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        if isinstance(e, ast.UnaryOp):
            return self.is_number(e.operand, scope, line)
        if isinstance(e, ast.BinOp):
            return self.is_number(e.left, scope, line) and self.is_number(e.right, scope, line)
        if isinstance(e, ast.Call):
            q = self.ctx.qualified_name(e.func) or ""
            return q.startswith("math.") or q in ("float", "int")
        if isinstance(e, (ast.Name, ast.Attribute)):
            k = self.ctx.analysis.kind(e, scope, line)
            if k is not None:
                return k.what == NUMBER
            return self._number_name(e, scope, line)
        return False

    def _number_name(self, e: ast.Name | ast.Attribute, scope: Scope, line: int) -> bool:
        """A local bound to a number, a parameter whose default is one, a ``self``
        attribute assigned a number once (``self.scale = dim ** -0.5`` in ``__init__``)."""
        if isinstance(e, ast.Name):
            b = scope.binding_before(e.id, line)
            if b is not None and b.value is not None:
                return b.value is not e and self.is_number(b.value, scope, b.stmt.lineno)
            fn = scope.node
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = fn.args
                pos = [*a.posonlyargs, *a.args]
                pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + [
                    (x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
                return any(x.arg == e.id and isinstance(d, ast.Constant)
                           and isinstance(d.value, (int, float))
                           and not isinstance(d.value, bool) for x, d in pairs)
            return False
        cls = self.ctx.analysis.class_of(scope.node)
        if not (isinstance(e.value, ast.Name) and e.value.id == "self") or cls is None:
            return False
        info = cls.attrs.get(e.attr)
        if info is None or info.later or info.value is None:
            return False
        return self.is_number(info.value, self.ctx.scope(info.method), info.stmt.lineno)

    # -- shapes --------------------------------------------------------------------------
    def dims(self, e: ast.AST, scope: Scope, line: int, depth: int = 0) -> Dims | None:
        """What ``e`` (read at ``line`` in ``scope``) is shown to be, or None."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(e, ast.Name) and scope.bindings.get(e.id):
            return self._name(e, scope, line, depth)
        if isinstance(e, (ast.Name, ast.Attribute)):  # a global, an attribute: its maker
            k = self.ctx.analysis.kind(e, scope, line)
            if k is not None and k.what in (PARAMETER, BUFFER, TENSOR) \
                    and isinstance(k.node, ast.Call):
                return self._made(k.node, scope, line, depth)
            return None
        if isinstance(e, ast.BinOp):
            return self._binop(e, scope, line, depth)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            return self.dims(e.operand, scope, line, depth + 1)
        if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Call) \
                and int_value(e.slice) == 0:
            return self._reduced(e.value, scope, line, depth, ("max", "min"))
        if isinstance(e, ast.Attribute) and e.attr == "values" and isinstance(e.value, ast.Call):
            return self._reduced(e.value, scope, line, depth, ("max", "min"))
        if isinstance(e, ast.Call):
            return self._call(e, scope, line, depth)
        return None

    def _name(self, e: ast.Name, scope: Scope, line: int, depth: int) -> Dims | None:
        b = scope.binding_before(e.id, line)
        if b is None or b.value is None or not isinstance(b.stmt, ast.Assign) \
                or len(b.stmt.targets) != 1 or not isinstance(b.stmt.targets[0], ast.Name):
            return None
        return self.dims(b.value, scope, b.stmt.lineno, depth + 1)

    def _made(self, call: ast.Call, scope: Scope, line: int, depth: int) -> Dims | None:
        """A parameter or tensor made by ``nn.Parameter(torch.randn(k, 1))`` and the like."""
        q = self.ctx.qualified_name(call.func) or ""
        if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") and call.args:
            inner = call.args[0]
            return self._made(inner, scope, line, depth + 1) \
                if isinstance(inner, ast.Call) else None
        if q.startswith("torch.") and q.rpartition(".")[2] in FACTORIES:
            sizes = _sizes(call)
            if q.endswith(".full"):  # torch.full((k, 1), value)
                first = call.args[0] if call.args else None
                sizes = list(first.elts) if isinstance(first, (ast.Tuple, ast.List)) else None
            return _from_sizes(sizes) if sizes else None
        return None

    def _binop(self, e: ast.BinOp, scope: Scope, line: int, depth: int) -> Dims | None:
        if isinstance(e.op, ast.MatMult):
            right = self.dims(e.right, scope, line, depth + 1)
            if right is None or right.rank is None or right.rank < 2 or not right.has_one(-1):
                return None
            left = self.dims(e.left, scope, line, depth + 1)
            rank = max(left.rank, right.rank) if left is not None and left.rank else None
            return Dims(rank, rank or 2, frozenset({-1} | ({rank - 1} if rank else set())))
        if not isinstance(e.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
            return None
        if self.is_number(e.right, scope, line):
            return self.dims(e.left, scope, line, depth + 1)
        if self.is_number(e.left, scope, line) and not isinstance(e.op, ast.Pow):
            return self.dims(e.right, scope, line, depth + 1)
        return None  # two tensors: broadcasting may stretch a size-1 dim

    def _reduced(self, call: ast.Call, scope: Scope, line: int, depth: int,
                 names: tuple[str, ...] | frozenset[str]) -> Dims | None:
        """``x.sum(d, keepdim=True)``: ``x`` with ``d`` of size 1."""
        f = call.func
        if not isinstance(f, ast.Attribute) or f.attr not in names:
            return None
        keep = next((k.value for k in call.keywords if k.arg == "keepdim"), None)
        if not (isinstance(keep, ast.Constant) and keep.value is True):
            return None
        d = int_value(arg(call, 0, "dim"))
        if d is None or self._is_module(f.value):
            return None
        base = self.dims(f.value, scope, line, depth + 1) or Dims()
        base = base.with_rank(base.rank)
        got = Dims(base.rank, max(base.min_rank, d + 1 if d >= 0 else -d), base.ones | {d})
        return got.with_rank(got.rank)

    def _is_module(self, e: ast.AST) -> bool:
        """``torch``/``np``... (an imported name), not a tensor."""
        return isinstance(e, ast.Name) and self.ctx.imports.is_imported(e.id)

    def _call(self, e: ast.Call, scope: Scope, line: int, depth: int) -> Dims | None:
        f = e.func
        q = self.ctx.qualified_name(f) or ""
        if q.startswith("torch.") and not isinstance(f, ast.Call):
            return self._torch_function(e, q.rpartition(".")[2], scope, line, depth)
        if isinstance(f, ast.Call):  # `nn.Linear(k, 1)(x)`
            return self._layer(f, e, scope, line, depth)
        if isinstance(f, (ast.Name, ast.Attribute)):
            k = self.ctx.analysis.kind(f, scope, line)
            if k is not None and k.what == MODULE:
                return self._layer(k.node, e, scope, line, depth) \
                    if isinstance(k.node, ast.Call) else None
        if isinstance(f, ast.Attribute) and not self._is_module(f.value):
            return self._method(e, f, scope, line, depth)
        return None

    def _torch_function(self, e: ast.Call, name: str, scope: Scope, line: int,
                        depth: int) -> Dims | None:
        if name in FACTORIES:
            return self._made(e, scope, line, depth)
        if name == "cat" and e.args and isinstance(e.args[0], (ast.Tuple, ast.List)):
            d = int_value(arg(e, 1, "dim")) or 0
            for x in e.args[0].elts:
                got = self.dims(x, scope, line, depth + 1)
                if got is not None and got.rank is not None:
                    return Dims(got.rank, got.rank, frozenset(
                        i for i in got.ones if got.norm(i) != got.norm(d)))
            return None
        if name in ("unsqueeze",) and e.args:
            return self._unsqueeze(e.args[0], arg(e, 1, "dim"), scope, line, depth)
        if name in ELEMENTWISE and e.args and self._numbers_only(e, e.args[1:], scope, line, name):
            return self.dims(e.args[0], scope, line, depth + 1)
        if name in ("matmul", "mm", "bmm") and len(e.args) == 2:
            return self._binop(ast.BinOp(e.args[0], ast.MatMult(), e.args[1]), scope, line,
                               depth)
        if name == "normalize" and e.args:
            return self.dims(e.args[0], scope, line, depth + 1)
        return None

    def _numbers_only(self, call: ast.Call, rest: list[ast.expr], scope: Scope, line: int,
                      name: str) -> bool:
        """``x.add(1.0)``, not ``x.add(y)`` (``y`` may broadcast the size-one dim away)."""
        if name not in BINARY:
            return True
        vals = [*rest, *(k.value for k in call.keywords if k.arg not in ("alpha", "out"))]
        return all(self.is_number(v, scope, line) or isinstance(v, ast.Constant)
                   and v.value is None for v in vals)

    def _unsqueeze(self, base_e: ast.AST, d_e: ast.AST | None, scope: Scope, line: int,
                   depth: int) -> Dims | None:
        d = int_value(d_e)
        if d is None:
            return None
        base = self.dims(base_e, scope, line, depth + 1) or Dims()
        if base.rank is not None:
            r = base.rank + 1
            nd = d if d >= 0 else d + r
            if not 0 <= nd < r:
                return None
            pos = {base.norm(i) for i in base.ones} - {None}
            ones = {i + (i >= nd) for i in pos if i is not None} | {nd}  # type: ignore[operator]
            return Dims(r, r, frozenset(ones)).with_rank(r)
        if d >= 0:  # the dims before d keep their front indices
            return Dims(None, max(base.min_rank + 1, d + 1),
                        frozenset({i for i in base.ones if 0 <= i < d} | {d}))
        return Dims(None, max(base.min_rank + 1, -d),
                    frozenset({i for i in base.ones if d < i < 0} | {d}))

    def _method(self, e: ast.Call, f: ast.Attribute, scope: Scope, line: int,
                depth: int) -> Dims | None:
        m = f.attr
        if m in RESHAPES:
            sizes = _sizes(e)
            return _from_sizes(sizes) if sizes else None
        if m == "unsqueeze":
            return self._unsqueeze(f.value, arg(e, 0, "dim"), scope, line, depth)
        if m in KEEPDIM_REDUCTIONS:
            return self._reduced(e, scope, line, depth, KEEPDIM_REDUCTIONS)
        if m in ("transpose", "swapaxes") and len(e.args) == 2:
            a, b = int_value(e.args[0]), int_value(e.args[1])
            if a is None or b is None:
                return None
            base = self.dims(f.value, scope, line, depth + 1) or Dims()
            low = max(a + 1 if a >= 0 else -a, b + 1 if b >= 0 else -b)
            if base.rank is not None:
                na, nb = base.norm(a), base.norm(b)
                if na is None or nb is None:
                    return None
                pos = {base.norm(i) for i in base.ones} - {None}
                swap = {na: nb, nb: na}
                return Dims(base.rank, base.rank, frozenset(
                    swap.get(i, i) for i in pos)).with_rank(base.rank)  # type: ignore[arg-type]
            if (a < 0) != (b < 0):
                return Dims(None, max(base.min_rank, low))
            swap = {a: b, b: a}  # same-sign indices only: the others may be a or b
            return Dims(None, max(base.min_rank, low),
                        frozenset(swap.get(i, i) for i in base.ones if (i < 0) == (a < 0)))
        if m == "permute":
            perm = [int_value(x) for x in (_sizes(e) or [])]
            if not perm or any(p is None for p in perm):
                return None
            n = len(perm)
            base = (self.dims(f.value, scope, line, depth + 1) or Dims()).with_rank(n)
            return Dims(n, n, frozenset(i for i, p in enumerate(perm)
                                        if base.has_one(p))).with_rank(n)  # type: ignore[arg-type]
        if m in ELEMENTWISE and self._numbers_only(e, e.args, scope, line, m):
            return self.dims(f.value, scope, line, depth + 1)
        return None

    # -- layers --------------------------------------------------------------------------
    def _layer(self, ctor: ast.Call, call: ast.Call, scope: Scope, line: int,
               depth: int) -> Dims | None:
        """The output of the module built by ``ctor`` applied to ``call``'s input."""
        if not call.args:
            return None
        base = self.dims(call.args[0], scope, line, depth + 1)
        return self.through(ctor, base, scope, line)

    def through(self, ctor: ast.Call, base: Dims | None, scope: Scope,
                line: int, inside: tuple[ast.Call, ...] = ()) -> Dims | None:
        """``base`` through the layer (or ``nn.Sequential`` of layers) ``ctor`` builds;
        ``inside``: the containers being read (``model = nn.Sequential(norm, model)`` names
        itself when read at a later line: unknown)."""
        q = self.ctx.qualified_name(ctor.func) or ""
        if q in SEQUENTIAL:
            if ctor.keywords or ctor in inside:
                return None
            for layer in ctor.args:
                layer_ctor = self.ctor_of(layer, scope, line)
                if layer_ctor is None:
                    return None
                base = self.through(layer_ctor, base, scope, line, (*inside, ctor))
            return base
        if q in SHAPE_KEEPING:
            return base
        if q in LINEAR:
            out = int_value(arg(ctor, 1, "out_features"))
            b = base or Dims()
            last = (b.rank if b.rank is not None else b.min_rank) - 1
            keep = {i for i in b.ones if i < -1 or 0 <= i < last}  # not the features dim
            ones = keep | ({-1} if out == 1 else set())
            return Dims(b.rank, max(b.min_rank, 1), frozenset(ones)).with_rank(b.rank)
        n = CONV.get(q)
        if n is not None:
            out = int_value(arg(ctor, 1, "out_channels"))
            if out != 1:
                return Dims(base.rank if base else None, n + 1)
            b = base or Dims()
            rank = b.rank if b.rank in (n + 1, n + 2) else (n + 2 if b.min_rank >= n + 2
                                                             else None)
            return Dims(rank, n + 1, frozenset({-(n + 1)})).with_rank(rank)
        return None

    def ctor_of(self, layer: ast.AST, scope: Scope, line: int) -> ast.Call | None:
        """The call that builds the module ``layer`` (itself when built in place)."""
        if isinstance(layer, ast.Call):
            return layer
        if isinstance(layer, (ast.Name, ast.Attribute)):
            k = self.ctx.analysis.kind(layer, scope, line)
            if k is not None and k.what == MODULE and isinstance(k.node, ast.Call):
                return k.node
        return None
