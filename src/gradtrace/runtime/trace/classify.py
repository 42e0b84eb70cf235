"""Which handler a torch call needs on the tracer's hot path (NOTE [hot path] in
:mod:`.provenance`): the kinds, and :func:`classify`, cached per function."""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.runtime.trace.dropped import DROPPABLE
from gradtrace.runtime.trace.eval_dropout import NAMES as DROPOUT_NAMES
from gradtrace.runtime.trace.singleton import SOFTMAX_FUNCS

Tensor = torch.Tensor

# func classification
PLAIN, INPLACE, SETGRAD, BACKWARD, AGRAD, ITEM, CTOR, DATA_GET, GRAD_GET, GRAD_SET, RG_SET, \
    ZEROISH, PASS, DETACH, MAYBE_INPLACE, WHERE, AMP, DROPPABLE_OP, COMBINE, TO, IS_LEAF, \
    LOSS, SOFTMAX, DATA_SET, COMPARE = range(25)
WHERE_CHECKS = 4  # calls per torch.where line whose branches are checked for inf/NaN
CALL_KIND: dict[Any, int] = {}
INPLACE_ARG: dict[Any, int] = {}  # functional ops with an `inplace` parameter -> its position
DROP_FUNCS: set[Any] = set()  # those of them whose dropped result is a no-op (NOTE [dropped result])
DROPOUT_FUNCS: set[Any] = set()  # the functional dropouts (NOTE [functional dropout in eval])
_ITEM_NAMES = {"item", "__float__", "__int__", "tolist", "__index__", "__complex__"}
_ZERO_NAMES = {"zero_", "_foreach_zero_", "fill_", "detach_"}
_PASS_NAMES = {"__get__", "__set__", "__repr__", "__format__", "__str__", "size", "dim", "numel",
               "__len__", "__hash__", "__bool__", "__contains__", "__iter__", "is_floating_point",
               "data_ptr", "stride", "element_size", "get_device", "is_contiguous",
               "storage_offset",
               "untyped_storage", "_typed_storage", "__reduce_ex__", "__deepcopy__", "__setstate__",
               "is_complex", "__array__", "numpy", "__array_wrap__", "is_inference"}


# factories that read only the shape/dtype of a tensor argument: their result was never part
# of the graph, so it is no cut (randn_like(mu) in a reparameterisation)
SHAPE_ONLY = {"zeros_like", "ones_like", "empty_like", "rand_like", "randn_like",
               "randint_like", "full_like", "new_zeros", "new_ones", "new_empty", "new_full"}
# factories whose values carry nothing (a buffer to fill): NOTE [leaf made trainable too early]
CONST_FACTORIES = {"zeros", "ones", "empty", "full", "eye", "zeros_like", "ones_like",
                   "empty_like", "full_like", "new_zeros", "new_ones", "new_empty", "new_full"}
_NAMES: dict[Any, str] = {}
_F = torch.nn.functional
# the losses whose input is checked (NOTE [loss input] in :mod:`.loss_input`) -> short name
LOSS_FUNCS: dict[Any, str] = {
    _F.kl_div: "kl_div", torch.kl_div: "kl_div", _F.nll_loss: "nll_loss",
    _F.cross_entropy: "cross_entropy", _F.binary_cross_entropy: "bce",
    _F.binary_cross_entropy_with_logits: "bce_logits",
    torch.binary_cross_entropy_with_logits: "bce_logits"}
# the comparison losses whose target is looked at (NOTE [teacher target computed with grad])
COMPARE_FUNCS = frozenset({_F.l1_loss, _F.mse_loss, _F.smooth_l1_loss, _F.huber_loss})


def call_name(func: Any) -> str:
    name = _NAMES.get(func)
    if name is None:
        name = _NAMES[func] = getattr(func, "__name__", "") or type(func).__name__
    return name


def classify(func: Any) -> int:
    """Which handler a torch function needs (cached)."""
    name = call_name(func)
    owner = getattr(func, "__self__", None)
    if name in ("__get__", "__set__") and owner is not None:
        attr = getattr(owner, "__name__", "")
        if name == "__get__":
            return {"data": DATA_GET, "grad": GRAD_GET, "is_leaf": IS_LEAF}.get(attr, PASS)
        return {"grad": GRAD_SET, "requires_grad": RG_SET, "data": DATA_SET}.get(attr, PASS)
    if func is torch._C._set_grad_enabled:
        return SETGRAD
    if func is torch.Tensor.backward or func is torch.autograd.backward:
        return BACKWARD
    if func is torch.autograd.grad:
        return AGRAD
    if name in _ITEM_NAMES:
        return ITEM
    if func in LOSS_FUNCS:
        return LOSS
    if func in SOFTMAX_FUNCS:  # NOTE [softmax over a singleton dim]
        return SOFTMAX
    if func in COMPARE_FUNCS:
        return COMPARE
    if func is torch.tensor or name == "as_tensor":
        return CTOR
    if func is torch.where or func is torch.Tensor.where:
        return WHERE
    if name == "_amp_foreach_non_finite_check_and_unscale_":
        return AMP
    if name == "requires_grad_":
        return RG_SET
    if name in ("detach", "detach_copy"):
        return DETACH
    if name in _ZERO_NAMES:
        return ZEROISH
    if name in _PASS_NAMES:
        return PASS
    pos = _inplace_position(func)
    if pos >= 0:
        INPLACE_ARG[func] = pos
        if name in DROPPABLE:
            DROP_FUNCS.add(func)
        if name in DROPOUT_NAMES and getattr(func, "__module__", "") == "torch.nn.functional":
            DROPOUT_FUNCS.add(func)
        return MAYBE_INPLACE
    if (name.endswith("_") and not name.endswith("__")) or name.startswith("__i") \
            or name == "__setitem__":
        return INPLACE
    if name == "to":
        return TO  # NOTE [loaded state thrown away]
    if name in ("add", "sub", "__add__", "__radd__", "__sub__", "__rsub__"):
        return COMBINE  # `a + b` reaches the mode as Tensor.add (NOTE [dead loss term])
    return DROPPABLE_OP if name in DROPPABLE else PLAIN


def _inplace_position(func: Any) -> int:
    """Position of an ``inplace`` parameter (F.relu(x, inplace=True)...), or -1."""
    module = getattr(func, "__module__", "") or ""
    if not module.startswith("torch.nn.functional"):
        return -1
    import inspect

    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return -1
    return params.index("inplace") if "inplace" in params else -1


def first_grad_tensor(args: tuple[Any, ...]) -> Tensor | None:
    for a in args:
        if isinstance(a, Tensor):
            if a.requires_grad:
                return a
        elif isinstance(a, (list, tuple)):
            for b in a:
                if isinstance(b, Tensor) and b.requires_grad:
                    return b
    return None
