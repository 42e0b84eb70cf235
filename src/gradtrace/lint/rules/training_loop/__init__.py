"""GT5xx: the training loop and the lifetime of the autograd graph.

Rules: zero_grad placement and clipping order (:mod:`.zero_grad`), graphs kept alive or
backwarded twice (:mod:`.graph_lifetime`), and misused return values / non-scalar losses
(:mod:`.api_misuse`). Shared loop facts live in :mod:`._loop`; which bindings a value is
computed from and which hold a graph, in :mod:`gradtrace.lint.analysis.graph_deps`.
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("`zero_grad()` done by a helper whose name does not say so, or by a callback/hook",
     "the clearing happens in code the checker does not see from the loop; "
     "see runtime: gradtrace run (gradients that grow step over step)"),
    ("`loss.backward()` on a non-scalar loss whose shape comes from the model "
     "(`model(x).backward()`, per-GPU or per-task losses stacked into a vector)",
     "the shape is only known when the code runs; see runtime: gradtrace run"),
    ("a value shared by two backward passes through a container, an attribute or another "
     "function", "the checker follows local names only; see runtime: gradtrace run"),
    ("trainable preprocessing applied once before the loop when the module is frozen "
     "elsewhere (another file, a config flag)",
     "whether its parameters require grad is decided at run time; see runtime: gradtrace run"),
]
