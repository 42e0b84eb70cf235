"""GT7xx: misuse of the autograd API.

The rules live in :mod:`.functions` (GT701 gradient count of a custom Function),
:mod:`.grad_inputs` (GT702 ``torch.autograd.grad`` over an input outside the graph),
:mod:`.calls` (GT703 an unreduced loss returned by ``forward``, GT704 the log-probability of a
reparameterised sample), :mod:`.closure` (GT707 a closure given to ``step()`` that never runs
backward), :mod:`.discarded` (GT708 the result of an out-of-place tensor op dropped),
:mod:`.bool_flags` (GT712 an ``argparse`` ``type=bool`` flag deciding how gradients are taken)
and :mod:`.hessian_step` (GT713 an optimizer differentiating ``.grad`` after a backward
without ``create_graph``).
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("A custom `autograd.Function` whose `backward` returns a tuple built at run time "
     "(`return tuple(grads)`, `return helper(...)`), or whose `forward` takes `*args`",
     "the number of gradients is only known when backward runs; see runtime: gradtrace run"),
    ("`torch.autograd.grad` over tensors made in another function or stored on `self`",
     "whether they require grad and took part in the graph is only known at run time; "
     "see runtime: gradtrace run"),
]
