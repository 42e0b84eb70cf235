"""GT1xx: values that leave the autograd graph on their way to the loss.

The rules live in :mod:`.numbers` (GT101-GT104) and :mod:`.cuts` (GT105-GT108); the loss-path
analysis they share is :mod:`._paths` (see NOTE [loss paths] there).
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("A cut (`.item()`, `.detach()`, `.data`, NumPy, `argmax`) inside a helper function or "
     "module whose result the loss uses",
     "the static checker follows names inside one function only; see runtime: gradtrace run"),
    ("`.detach()` whose term is multiplied into the loss (`w.detach() * loss`) or mixed with "
     "live values: whether the detached part was meant to train cannot be read from the code",
     "intent (stop-gradient by design vs. a forgotten sub-network) is not in the source; "
     "see runtime: gradtrace run (parameters that never receive a gradient)"),
    ("A parameter read through `.data` inside `forward` when the value reaches the loss only "
     "via a module call",
     "which tensors are trainable parameters and which are buffers is known only at run time; "
     "see runtime: gradtrace run"),
]
