"""GT6xx: in-place writes into tensors that autograd saved for backward.

Autograd saves some tensors to compute gradients later and checks their version counter when
backward runs; an in-place write in between makes backward raise
`RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation: [...], which is output 0 of <Op>, is at version N; expected version M
instead.` (pytorch-facts.md#saved-tensor-inplace). Which ops save their *output* was checked op by
op on torch 2.13:
sigmoid, tanh, exp, expm1, softmax, log_softmax, sqrt, rsqrt, reciprocal and relu do, and
`torch.linalg.eigh` both of its outputs (eigenvalues and eigenvectors); leaky_relu
and elu only in place (`inplace=True`, `leaky_relu_`: out of place they save their input); log,
gelu, sin, relu6/hardtanh, silu and hardswish (in-place or not) do not. What a module call gives
back (a Sequential, a block of the file, a ModuleList block...) is NOTE [module results].
"""
from __future__ import annotations

UNDECIDABLE: list[tuple[str, str]] = [
    ("an in-place write through an alias or a view made elsewhere (`y = p.view(-1); y[0] = 0`, "
     "a tensor returned by another function)",
     "which tensors share storage and version counter is only known at runtime; see runtime: "
     "gradtrace run"),
    ("`optimizer.step()` between backward passes whose graphs are built in different functions",
     "whether the graphs share the stepped parameters depends on the call path; see runtime: "
     "gradtrace run"),
    ("an in-place write into a saved output when the input may not require grad",
     "only raises when autograd recorded the op; see runtime: gradtrace run"),
]
