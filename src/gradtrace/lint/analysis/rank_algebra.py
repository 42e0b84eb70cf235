"""The algebra of ranks: what a value's rank is after an operation (NOTE [ranks]).

:mod:`.ranks` reads code into ranks; this module holds the ranks themselves (:class:`Rank`),
the torch vocabularies that decide them (reductions, shape-keeping ops, layers, losses) and the
pure rules that combine them (broadcasting, a reduction over a ``dim``, a spelled-out shape, a
layer's output, a loss's reduction). Nothing here reads a name or a call site.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from gradtrace.lint.analysis.dims import int_value, keyword

SCALAR, ONE, MANY, ANY = "scalar", "one", "many", "any"  # ANY: rank read, count not
REDUCTIONS = frozenset({"mean", "sum", "prod", "max", "min", "norm", "std", "var", "amax",
                        "amin", "logsumexp", "nansum", "nanmean", "median"})
KEEPS = frozenset({"clamp", "clip", "abs", "exp", "log", "sigmoid", "tanh", "relu", "float",
                   "double", "half", "to", "cuda", "cpu", "clone", "contiguous", "detach",
                   "neg", "pow", "sqrt", "gather", "masked_fill", "mul", "add", "sub", "div",
                   "log1p", "expm1", "square", "type_as", "requires_grad_", "clamp_min",
                   "clamp_max", "softplus", "elu", "leaky_relu", "gelu", "silu", "dropout",
                   "logsigmoid", "normalize", "reciprocal", "rsqrt", "sin", "cos", "relu6",
                   "selu", "mish", "hardtanh"})
TUPLED = frozenset({"max", "min", "median"})  # over a ``dim``: (values, indices)
SOFTMAX = frozenset({"softmax", "log_softmax"})
FACTORIES = frozenset({"ones", "zeros", "randn", "rand", "empty", "full"})
LEGACY = frozenset({"Tensor", "FloatTensor", "DoubleTensor", "cuda.FloatTensor"})
# a layer's output: per feature when the size it is built with (this argument) is a constant
# above 1; a convolution's holds a map per channel
FEATURES = {"Linear": (1, "out_features"), "Bilinear": (2, "out_features"),
            "Embedding": (1, "embedding_dim"), "LazyLinear": (0, "out_features")}
CONVS = frozenset({"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                   "ConvTranspose3d"})
ELEMENTWISE = frozenset({"ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "ELU",
                         "LeakyReLU", "GELU", "SiLU", "Identity", "Softplus", "PReLU"})
LOSS_FUNCTIONS = frozenset({"cross_entropy", "nll_loss", "mse_loss", "l1_loss",
                            "smooth_l1_loss", "binary_cross_entropy",
                            "binary_cross_entropy_with_logits", "kl_div", "huber_loss",
                            "margin_ranking_loss", "soft_margin_loss", "hinge_embedding_loss",
                            "cosine_embedding_loss", "poisson_nll_loss", "triplet_margin_loss"})
CLASS_DIM = frozenset({"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"})


@dataclass(frozen=True)
class Rank:
    """What :func:`rank` knows of a value (NOTE [ranks])."""

    what: str                    # SCALAR, ONE, MANY or ANY
    lo: int = 0                  # at least this many dims
    hi: int | None = None        # at most (None: no bound); lo == hi: exactly
    origin: ast.AST | None = None  # the file function's ``return`` a MANY value came out of
    unreduced: bool = False      # MANY: a ``reduction='none'`` loss's output, unchanged
    passed: bool = False         # ``origin`` is a caller's: the value came in as an argument
    single: bool = False         # MANY: its first dim is a batch of one made here (NOTE [ranks])

    @property
    def ndim(self) -> int | None:
        return self.lo if self.hi == self.lo else None


SCALAR_RANK = Rank(SCALAR, 0, 0)


def derived(base: Rank, what: str, lo: int, hi: int | None) -> Rank:
    """A rank computed from ``base`` by an operation: its origin kept, no longer a loss's
    unreduced output."""
    return Rank(what, lo, hi, base.origin, passed=base.passed, single=base.single)


def combine(a: Rank | None, b: Rank | None) -> Rank | None:
    """The rank of ``a <op> b`` under broadcasting."""
    if a is not None and b is not None:
        if MANY in (a.what, b.what):
            return derived(a if a.what == MANY else b, MANY, max(a.lo, b.lo), None)
        hi = None if a.hi is None or b.hi is None else max(a.hi, b.hi)
        what = ANY if ANY in (a.what, b.what) else SCALAR if hi == 0 else ONE
        return Rank(what, max(a.lo, b.lo), hi)
    known = a or b  # the other may have more dims
    if known is not None and known.lo >= 1:
        return derived(known, MANY if known.what == MANY else ANY, known.lo, None)
    return None


def agree(got: list[Rank | None]) -> Rank | None:
    """One rank for several values that may each be the result (the returns of a function):
    all scalars, or all many-valued; None otherwise."""
    if not got or any(g is None for g in got):
        return None
    whats = {g.what for g in got}  # type: ignore[union-attr]
    if len(whats) != 1:
        return None
    first = got[0]
    assert first is not None
    if first.what == ONE and len({(g.lo, g.hi) for g in got}) != 1:  # type: ignore[union-attr]
        return None
    return Rank(first.what, min(g.lo for g in got), first.hi, first.origin,  # type: ignore
                all(g.unreduced for g in got), first.passed,  # type: ignore[union-attr]
                any(g.single for g in got))  # type: ignore[union-attr]


def shape_args(call: ast.Call, start: int = 0) -> list[ast.expr] | None:
    """The sizes a factory or ``view`` is given (``(2, 3)`` or ``2, 3``); None: unknown."""
    args = call.args[start:]
    if any(isinstance(a, ast.Starred) for a in args) or call.keywords and not args:
        return None
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        return list(args[0].elts)
    if len(args) == 1 and int_value(args[0]) is None and not isinstance(args[0], ast.Constant):
        return None  # `view(shape)`, `ones(x.size())`: not read
    return list(args)


def sized(sizes: list[ast.expr], base: Rank | None) -> Rank | None:
    """A shape spelled out (``view(1)``, ``torch.ones(2, 3)``), of a value of rank ``base``."""
    n = len(sizes)
    if all(int_value(s) == 1 for s in sizes):
        return Rank(SCALAR if n == 0 else ONE, n, n)
    single = n >= 2 and int_value(sizes[0]) == 1  # `torch.randn(1, 6)`, `x.view(1, -1)`
    if base is not None and base.what == MANY:
        return replace(derived(base, MANY, n, n), single=single or base.single)
    if any((int_value(s) or 0) > 1 for s in sizes):
        return Rank(MANY, n, n, single=single)
    return Rank(ANY, n, n)


def reduced(base: Rank | None, dim: ast.AST, keepdim: ast.AST | None) -> Rank | None:
    """A reduction over ``dim``: many-valued when the reduced value is, and keeps its first
    (batch) dim: ``keepdim=True``, or ``dim`` >= 1 of a value of 2 dims or more (``-k`` for
    ``k`` below its least number of dims: never dim 0)."""
    if base is None or base.what != MANY:
        return None
    if isinstance(keepdim, ast.Constant) and keepdim.value is True:
        return base
    i = int_value(dim)
    if i is not None and (i >= 1 or i < 0 and -i < base.lo) and base.lo >= 2 \
            and not base.single:
        return derived(base, MANY, base.lo - 1, None if base.hi is None else base.hi - 1)
    return None


def softmax_of(base: Rank | None, dim: ast.AST | None) -> Rank | None:
    i = int_value(dim)
    if i is None:
        return None
    lo = i + 1 if i >= 0 else -i
    if base is None:
        return Rank(MANY, lo, None)
    return derived(base, MANY, max(lo, base.lo), base.hi)


def squeezed(base: Rank | None, i: int | None) -> Rank | None:
    """``x.squeeze(i)``: the same elements, one dim fewer when dim ``i`` has size 1 (torch
    raises when ``x`` has no dim ``i``, so it had at least ``i + 1``)."""
    if base is None or i is None or base.what != MANY:
        return None
    return derived(base, MANY, max(base.lo, i + 1 if i >= 0 else -i) - 1, base.hi)


def unsqueezed(base: Rank | None, i: int | None) -> Rank | None:
    if base is None or i is None:
        return None
    if base.what == SCALAR:
        return Rank(ONE, 1, 1)
    hi = None if base.hi is None else base.hi + 1
    if base.what == ONE:
        return Rank(ONE, base.lo + 1, hi)
    got = derived(base, base.what, max(base.lo, i if i >= 0 else 0) + 1, hi)
    return replace(got, single=True) if i == 0 else got  # `x.unsqueeze(0)`: a batch of one


def literal(a: ast.AST, legacy: bool) -> Rank | None:
    """``torch.tensor(1.)`` (0-dim), ``torch.tensor([1.])`` / ``torch.FloatTensor([1])``
    (one value in a 1-dim shape); a legacy constructor's int is a size."""
    if isinstance(a, ast.Constant) and isinstance(a.value, (int, float)):
        if legacy:
            return Rank(ONE, 1, 1) if a.value == 1 else Rank(MANY, 1, 1)
        return SCALAR_RANK
    if isinstance(a, (ast.List, ast.Tuple)) and a.elts and all(
            isinstance(x, (ast.Constant, ast.UnaryOp)) for x in a.elts):
        return Rank(ONE, 1, 1) if len(a.elts) == 1 else Rank(MANY, 1, 1)
    return None


def reduction_args(call: ast.Call) -> tuple[ast.AST | None, ast.AST | None]:
    """``(reduction, reduce)`` a loss call or loss constructor takes effect with.

    # NOTE [legacy reduction]
    torch still takes the deprecated ``size_average`` and ``reduce`` arguments, and when either
    is given (not None) they decide the reduction and ``reduction=`` is ignored
    (``_Reduction.legacy_get_string``, each defaulting to True): ``reduce=False`` gives
    ``'none'``, else ``size_average=False`` gives ``'sum'``, else ``'mean'``. On torch 2.13
    ``nn.BCEWithLogitsLoss(size_average=True, reduction='none')`` has ``reduction == 'mean'``
    and its output is 0-dim (checked). A legacy argument that is not a constant: unknown."""
    reduction, legacy = keyword(call, "reduction"), [
        keyword(call, "size_average"), keyword(call, "reduce")]
    given = [a for a in legacy if a is not None
             and not (isinstance(a, ast.Constant) and a.value is None)]
    if not given:
        return reduction, None
    if not all(isinstance(a, ast.Constant) for a in given):
        return given[0], None  # not a constant: loss_rank cannot tell
    size_average, reduce = (a.value if isinstance(a, ast.Constant) and a.value is not None
                            else True for a in legacy)
    return ast.Constant("mean" if size_average and reduce else "sum" if reduce
                        else "none"), None


def loss_rank(reduction: ast.AST | None, reduce: ast.AST | None, short: str,
              pred: Rank | None) -> Rank | None:
    if isinstance(reduce, ast.Constant) and reduce.value is False:
        reduction = ast.Constant("none")
    if reduction is None:
        return SCALAR_RANK
    if not isinstance(reduction, ast.Constant):
        return None
    if reduction.value in ("mean", "sum", "batchmean"):
        return SCALAR_RANK
    if reduction.value != "none":
        return None
    if short in CLASS_DIM and pred is not None and pred.ndim is not None:
        return Rank(MANY, max(1, pred.ndim - 1), max(1, pred.ndim - 1), unreduced=True)
    return Rank(MANY, max(1, pred.lo if pred else 1), None, unreduced=True)


def layer_rank(short: str, node: ast.AST | None) -> Rank | None:
    """The output of a ``torch.nn`` layer built by ``node`` (NOTE [ranks]): many-valued when
    it has a constant number of features above 1, or is a convolution; else at least 1-dim."""
    if short in CONVS:
        return Rank(MANY, 2, None)
    if short not in FEATURES:
        return None
    i, kw = FEATURES[short]
    size = None
    if isinstance(node, ast.Call):
        size = int_value(node.args[i]) if len(node.args) > i else int_value(keyword(node, kw))
    return Rank(MANY, 1, None) if size is not None and size > 1 else Rank(ANY, 1, None)


# a layer that maps the last dim only: its output has the input's dims
SAME_DIMS = frozenset({"Linear", "LazyLinear"})


def layer_on(short: str, node: ast.AST | None, x: Rank | None) -> Rank | None:
    """The output of a ``torch.nn`` layer built by ``node`` on an input of rank ``x``
    (NOTE [ranks]): a linear layer keeps the input's dims, so on a batch (many values in 2
    dims or more) it gives one output per sample even with one output feature."""
    out = layer_rank(short, node)
    if short not in SAME_DIMS or x is None or x.what not in (MANY, ANY) or x.lo < 1:
        return out
    if out is not None and out.what == MANY:
        return Rank(MANY, x.lo, x.hi, single=x.single)
    if x.what == MANY and x.lo >= 2 and not x.single:
        return Rank(MANY, x.lo, x.hi)
    return Rank(ANY, x.lo, x.hi)
