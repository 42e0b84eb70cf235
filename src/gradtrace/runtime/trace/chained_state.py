"""# NOTE [module state chains the graphs of its calls]

A tensor a module keeps across calls (a buffer, or a plain tensor attribute: an output buffer
reused with ``zero_()`` + ``scatter_add_``, a running statistic updated with ``mul_().add_()``,
a memory bank written by ``bank[i] = keys``) that is written *in place* with values that carry
a graph becomes a graph node itself: each call's in-place op records a node whose input edge
for the tensor's old value is the previous call's node. Nothing errors, but the graph reachable
from the tensor (and from everything read from it) grows with every call, and so do memory and
the cost of every backward through it (a molecular-dynamics force loop, nvalchemi's per-system
energy buffer). A tensor re-bound each call (``self.last = out``) holds one call's graph, not a
chain, and is not this.

Decided from the run only, when tracing ends: a module that ran at least twice holds, in
``_buffers`` or as a plain (non-Parameter) tensor attribute, a tensor with a ``grad_fn`` that
the program wrote in place at least four times (``_version``), and following the graph from
that ``grad_fn`` through the edge of the written tensor (an in-place node's first input) meets
a node of the same op again at least twice: the writes of earlier calls, covering at least
half the module's calls with grad, over at least two backward()/autograd.grad calls (a memory
written through one unrolled episode, or made again for each episode, holds that episode's
writes only: its graph is the computation, as in NOTE [losses kept alive]). Named: the line that
created the newest node (``records.created_site``, the in-place write that brings the graph),
else the module's own record; kind ``graph-kept`` (GT826, static twin GT505).
"""
from __future__ import annotations

from typing import Any

import torch

from gradtrace.findings import Finding

CHAIN_CAP = 4096  # nodes followed along the written tensor's edge


def chained_state_findings(state: Any, data: Any) -> list[Finding]:
    """GT826 for each module tensor that chains its calls' graphs, as
    NOTE [module state chains the graphs of its calls] says."""
    out: list[Finding] = []
    if state.backward_count < 2:
        return out  # one backward: a state written through one unrolled pass is its graph
    seen: set[int] = set()
    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs + rec.nograd_runs < 2:
            continue
        for name, t in _state_tensors(m):
            if id(t) in seen or t.grad_fn is None or t._version < 4:
                continue
            seen.add(id(t))
            chained = _chain_length(t.grad_fn)
            if chained < 3 or 2 * chained < rec.grad_runs:
                continue  # a state made again per episode holds that episode's writes only
            out.append(_finding(state, rec, m, name, t, chained))
    return out


def _state_tensors(m: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    got = [(k, v) for k, v in m._buffers.items() if v is not None]
    got += [(k, v) for k, v in vars(m).items() if isinstance(v, torch.Tensor)
            and not isinstance(v, torch.nn.Parameter) and not k.startswith("__")]
    return got


def _chain_length(gf: Any) -> int:
    """How many nodes of ``gf``'s op lie on the chain of first inputs from ``gf``."""
    kind, node, count = type(gf), gf, 0
    for _ in range(CHAIN_CAP):
        if type(node) is kind:
            count += 1
        nxt = getattr(node, "next_functions", ())
        if not nxt or nxt[0][0] is None:
            break
        node = nxt[0][0]
    return count


def _finding(state: Any, rec: Any, m: Any, name: str, t: torch.Tensor, chained: int) -> Finding:
    from gradtrace.runtime.build import code_for, make
    from gradtrace.runtime.trace.records import created_site, node_name

    site = created_site(t.grad_fn)[0] or rec.site
    owner = type(m).__name__
    held = "buffer" if name in m._buffers else "tensor attribute"
    return make(code_for("graph-kept", "GT826"), site,
                f"`{owner}.{name}`, a {held} the module keeps across calls, is written in place "
                f"here with values that carry a graph: every call's {node_name(t.grad_fn)} node "
                f"hangs on it and links to the previous call's ({chained} chained at the end, "
                f"{t._version} in-place writes), so the graph reachable from it, memory and the "
                "cost of each backward grow with the number of calls",
                fix=f"write detached values into `{name}` (or under torch.no_grad()), or build a "
                    "fresh tensor each call instead of reusing the stored one",
                severity="warning")
