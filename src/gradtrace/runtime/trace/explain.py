"""``gradtrace.explain(x)``: why a tensor has (or lacks) a ``grad_fn``, or what an error means.

Example::

    >>> loss = model(x).detach().sum()
    >>> print(gradtrace.explain(loss))      # inside gradtrace.trace(): names the detach line
    >>> try: loss.backward()
    ... except RuntimeError as e: print(gradtrace.explain(e))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradtrace.findings import Finding


@dataclass(frozen=True)
class Explanation:
    """The result of :func:`explain`: ``.findings`` plus a readable ``.text``."""

    subject: str
    text: str
    findings: tuple[Finding, ...] = ()

    def __str__(self) -> str:
        from gradtrace.runtime.render import render_text

        body = render_text(self.findings)
        return self.text + ("\n\n" + body if body else "\n")

    def __repr__(self) -> str:
        return f"<gradtrace.Explanation of {self.subject}: {len(self.findings)} finding(s)>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(str(self))


def explain(x: Any, tracer: Any = None) -> Explanation:
    """Explain a tensor (its graph, or where it left the graph) or an exception (diagnosis).

    Inside :func:`gradtrace.trace`, after it (the last session), or given ``tracer``, the
    explanation names the lines; without a tracer it says what can be read from the object alone.
    """
    from gradtrace.runtime.trace.tracer import last_tracer

    tracer = tracer or last_tracer()
    if isinstance(x, BaseException):
        return _explain_exception(x, tracer)
    import torch

    if isinstance(x, torch.Tensor):
        return _explain_tensor(x, tracer)
    raise TypeError(f"gradtrace.explain() takes a tensor or an exception, got "
                    f"{type(x).__name__!r}")


def _explain_exception(exc: BaseException, tracer: Any) -> Explanation:
    from gradtrace.runtime.catalogue import match_message
    from gradtrace.runtime.trace.tracer import diagnose

    found = diagnose(exc, tracer)
    pats = match_message(f"{type(exc).__name__}: {exc}")
    head = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    if pats and any(pats[0].explanation in f.message for f in found):
        text = head  # the finding below already says it: say it once
    else:
        text = head + ("\n" + pats[0].title + ". " + pats[0].explanation if pats
                       else "\n(gradtrace does not know this error)")
    return Explanation(type(exc).__name__, text, tuple(found))


def _graph_lines(t: Any, limit: int = 12) -> list[str]:
    from gradtrace.runtime.trace.records import created_site

    out: list[str] = []
    queue, seen = [t.grad_fn], {}
    leaves = 0
    while queue and len(seen) < 2000:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        if getattr(node, "variable", None) is not None:
            leaves += 1
            continue
        site, _ = created_site(node)
        if site is not None and len(out) < limit:
            out.append(f"  {type(node).__name__:<24} {site.path}:{site.line}  {site.source()}")
        queue.extend(n for n, _ in node.next_functions if n is not None)
    out.append(f"  ({leaves} leaf tensor(s) that require grad are upstream)")
    return out


def _explain_tensor(t: Any, tracer: Any) -> Explanation:
    from gradtrace.runtime.build import src
    from gradtrace.runtime.trace.diagnose import cut_finding

    shape = list(t.shape)
    if t.grad_fn is not None:
        text = "\n".join([f"tensor {shape} has grad_fn {type(t.grad_fn).__name__}: gradients "
                          "flow through it. Made by (latest first):", *_graph_lines(t)])
        return Explanation("tensor", text)
    if t.requires_grad:
        return Explanation("tensor", f"tensor {shape} is a leaf that requires grad (a parameter "
                           "or an input you created): backward() fills its .grad")
    cut = tracer.state.cut_of(t) if tracer is not None else None
    if cut is not None:
        f = cut_finding(cut, f"tensor {shape}", None)
        return Explanation("tensor", f"tensor {shape} has no grad_fn: it left the graph at "
                           f"{cut.site} ({src(cut.site)})", (f,))
    if t.is_inference():
        return Explanation("tensor", f"tensor {shape} was created inside torch.inference_mode()"
                           " and can never join an autograd graph (use .clone() outside it)")
    if tracer is None:
        why = ("run the code inside gradtrace.trace() to see the line where it left the graph")
    else:
        why = ("it was computed only from tensors that do not require grad (data, or "
               "parameters with requires_grad=False)")
    return Explanation("tensor", f"tensor {shape} has no grad_fn and does not require grad: {why}")
