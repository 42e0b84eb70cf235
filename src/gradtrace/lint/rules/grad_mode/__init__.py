"""GT2xx: grad mode. Graphs that were never recorded because grad was off where it mattered.

One module per theme: :mod:`.no_grad_loss` (a loss made under no-grad: GT201, GT202, GT207),
:mod:`.global_state` (GT203), :mod:`.inference` (GT204), :mod:`.autograd_calls` (GT205, GT206).
"""
from __future__ import annotations
