"""GT2xx: grad mode. Graphs that were never recorded because grad was off where it mattered.

One module per theme: :mod:`.no_grad_loss` (a loss made under no-grad: GT201, GT202, GT207),
:mod:`.global_state` (GT203), :mod:`.inference` (GT204), :mod:`.autograd_calls` (GT205, GT206);
the shared loss-source tracer is :mod:`gradtrace.lint.analysis.grad_sources`.
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("a loss term computed under `no_grad` next to a term that has a graph",
     "backward succeeds and only that term trains nothing; whether the term was meant as a "
     "constant (a target, a logged metric) is intent, not code; see runtime: gradtrace run"),
    ("`no_grad` in a model's forward or helper called from another file or package",
     "the training step and the no-grad block are not in the same file; see runtime: "
     "gradtrace run"),
    ("a cache filled lazily by the forward, where only the caller wraps that first call in "
     "`inference_mode()`",
     "the grad mode at the first call is a property of the call path, not of the cache's code; "
     "see runtime: gradtrace run"),
    ("reentrant `checkpoint` on an input whose `requires_grad` depends on the caller",
     "a hidden state normally requires grad; the first block's input or frozen embeddings do "
     "not, which depends on runtime values; see runtime: gradtrace run"),
    ("grad turned off by `torch.set_grad_enabled(flag)` with a flag computed at runtime",
     "the value of the flag is only known when the code runs; see runtime: gradtrace run"),
]
