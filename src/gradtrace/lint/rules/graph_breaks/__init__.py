"""GT1xx: values that leave the autograd graph on their way to the loss.

The rules live in :mod:`.numbers` (GT101-GT104), :mod:`.cuts` (GT105-GT108) and
:mod:`.rebuilt_params` (GT110), :mod:`.overwritten` (GT112), :mod:`.own_cut` (GT117),
:mod:`.copied_params` (GT118), :mod:`.late_requires_grad` (GT156); the loss-path
analysis they share is :mod:`._paths` (sinks, terms, verdicts; see NOTE [loss paths] there)
built on :mod:`gradtrace.lint.analysis.origins` (what a value is built from).
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("A cut (`.item()`, `.detach()`, `.data`, NumPy, `argmax`) made inside a module, a method "
     "or a helper in another file whose result the loss uses",
     "the static checker follows names inside one function, and into the same file's "
     "helpers (one that cuts everything it returns is followed from its callers: NOTE "
     "[helper cuts]); see runtime: gradtrace run"),
    ("`.detach()` between two trainable parts (an encoder output detached before a decoder "
     "or head): the loss still trains the later part, only the earlier one gets no gradient",
     "linear probing and staged training do this on purpose; only a run shows which "
     "parameters the optimizer holds but never receive a gradient; see runtime: gradtrace run"),
    ("A detached or Python-number factor multiplied into a live loss (`w.item() * loss`, "
     "`loss / loss.detach()`)",
     "a scale that is meant to carry no gradient is a common, deliberate idiom; see runtime: "
     "gradtrace run"),
    ("A parameter read through `.data` inside `forward` next to live inputs "
     "(`F.linear(x, self.weight.data)`) when the class does not register it as a Parameter "
     "read only that way (GT117), or updates it by hand",
     "which tensors are trainable parameters and which are buffers is known only at run time; "
     "see runtime: gradtrace run"),
]
