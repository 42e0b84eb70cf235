"""An out-of-place tensor op whose result the program throws away (``attn.masked_fill(m, 0.)``
as a statement of its own): the op ran, and nothing changed.

# NOTE [dropped result]
The ops of :data:`DROPPABLE` return a new tensor and have an in-place twin spelled with a
trailing underscore; written as a statement, the new tensor is dropped and the receiver is left
as it was (the DQN tutorial's `param.grad.data.clamp(-1, 1)`, flamingo's unmasked attention).
The tracer sees the op run; whether its result is kept is in the calling frame's bytecode: the
instruction after the call is ``POP_TOP`` (a statement's value discarded). Only a call made
directly from a user frame counts (a library function that discards a temporary is not the
program's line), and only such ops: ``F.relu(x)`` reaches the tracer as ``F.relu`` from the
user's frame. The check runs on these ops only, costs a frame read and a set lookup per call,
and reads each code object's bytecode once.
"""
from __future__ import annotations

import dis
from types import CodeType, FrameType

# method / function names (torch.clamp, Tensor.clamp, F.relu...) with an in-place twin
DROPPABLE = frozenset({
    "clamp", "clip", "clamp_min", "clamp_max", "add", "sub", "mul", "div", "neg", "abs", "sqrt",
    "exp", "log", "pow", "sign", "sigmoid", "tanh", "relu", "floor", "ceil", "round",
    "masked_fill", "masked_scatter", "index_fill", "index_add", "index_copy", "index_put",
    "scatter", "scatter_add", "scatter_reduce", "renorm", "lerp", "addcmul", "addcdiv",
    "nan_to_num", "fmod", "remainder", "reciprocal", "square", "true_divide", "multiply",
    "subtract", "divide", "unsqueeze", "squeeze", "t", "transpose", "copysign", "hardtanh",
    "leaky_relu", "elu", "selu", "celu", "rrelu", "silu", "mish", "threshold", "dropout",
    "normalize", "tril", "triu", "fill_diagonal", "logit", "erf", "exp2", "expm1", "log1p",
    "log2", "log10", "trunc", "frac", "sin", "cos", "tan", "atan2", "hypot", "float_power",
    "xlogy", "digamma", "deg2rad"})

# id(code) -> offsets of its calls whose result is popped (empty for internal code); the code
# objects are kept alive in _CODES so an id is never reused while it is a key
DROP_AT: dict[int, frozenset[int]] = {}
_CODES: list[CodeType] = []


def learn(code: CodeType) -> frozenset[int]:
    """The offsets of the calls in ``code`` whose result is popped right away (with their
    inline cache entries: f_lasti may point into them when the callee is Python code); none
    for torch's, gradtrace's or library code."""
    from gradtrace.runtime.frames import is_internal

    out: set[int] = set()
    if not is_internal(code):
        prev = None
        try:
            for ins in dis.get_instructions(code):
                if ins.opname == "POP_TOP" and prev is not None \
                        and prev.opname.startswith("CALL"):
                    out.update(range(prev.offset, ins.offset, 2))
                prev = ins
        except Exception:  # pragma: no cover - bytecode dis cannot read
            out.clear()
    if len(DROP_AT) > 8192:
        DROP_AT.clear()
        _CODES.clear()
    _CODES.append(code)
    hit = DROP_AT[id(code)] = frozenset(out)
    return hit


def result_dropped(frame: FrameType) -> bool:
    """Whether the call ``frame`` (a user frame) is making now is a statement whose value is
    discarded."""
    hit = DROP_AT.get(id(frame.f_code))
    if hit is None:
        hit = learn(frame.f_code)
    return frame.f_lasti in hit
