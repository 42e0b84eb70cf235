"""A gradient of ``.grad`` tensors a plain backward() left without a graph.

# NOTE [gradient of a .grad without graph]
Hessian-vector products, Hutchinson estimates and curvature probes differentiate the first
gradients again: ``torch.autograd.grad([p.grad for p in ps], ps, grad_outputs=vs)``. The
``.grad`` that ``loss.backward()`` accumulates has a graph only with ``create_graph=True``;
otherwise autograd.grad fails with "element 0 of tensors does not require grad". The run-time
fact: an output passed to autograd.grad *is* the ``.grad`` of one of its inputs (identity) and
has no ``grad_fn``. The line to change is the backward() that filled it, the last one before
the failing call, whose ``create_graph`` was left off. Read while tracing (the failing call) or
after the fact from the traceback (inside an optimizer's ``step``, which the tracer skips).
"""
from __future__ import annotations

from typing import Any

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make, src
from gradtrace.runtime.frames import Site


def _tensors(v: Any) -> list[Any]:
    import torch

    if isinstance(v, torch.Tensor):
        return [v]
    return [t for t in (v or ()) if isinstance(t, torch.Tensor)] \
        if isinstance(v, (list, tuple)) else []


def grads_without_graph(outputs: Any, inputs: Any, state: Any,
                        site: Site | None) -> Finding | None:
    """GT206 at the backward() that filled the ``.grad`` differentiated at ``site``."""
    outs, ins = _tensors(outputs), _tensors(inputs)
    grads = {id(g) for p in ins for g in [p.grad] if g is not None}
    if not any(id(o) in grads and o.grad_fn is None and not o.requires_grad for o in outs):
        return None
    sites = getattr(state, "backward_sites", None) or []
    bwd = next((s for s in reversed(sites) if s != site), None)
    if bwd is None:
        return None
    return make(code_for("grad-without-create-graph", "GT800"), bwd,
                "this backward() fills the .grad of the parameters without a graph "
                f"(create_graph is off), and {src(site)} differentiates those .grad again: they "
                "do not require grad, so the second-order gradient cannot be taken",
                fix="pass create_graph=True here (or take the first gradients with "
                    "torch.autograd.grad(loss, params, create_graph=True))",
                related=[(site, "the gradient of the .grad is asked here")])


def grad_of_grad_after(pat: Any, exc: BaseException, frame: Any, site: Site,
                       state: Any) -> list[Finding]:
    """The same reading from the traceback: torch.autograd.grad's own frame holds its
    ``outputs`` and ``inputs``."""
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame
        loc = f.f_locals
        if f.f_code.co_name == "grad" and "outputs" in loc and "inputs" in loc:
            found = grads_without_graph(loc["outputs"], loc["inputs"], state, site)
            return [found] if found is not None else []
        tb = tb.tb_next
    return []


POSTHOC = {"element0": grad_of_grad_after}

__all__ = ["POSTHOC", "grads_without_graph"]
