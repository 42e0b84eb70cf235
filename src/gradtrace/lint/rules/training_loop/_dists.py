"""torch.distributions objects that compute and keep a tensor from their parameters when built.

# NOTE [caching distributions]
``Categorical(probs)`` normalizes its parameter at construction (``probs / probs.sum(-1)``,
``logits - logits.logsumexp(-1)``), ``Bernoulli(probs)`` and ``Binomial(n, probs)`` turn it
into logits once (cached): the tensor they keep carries a graph from a parameter that requires
grad, and an op that saved tensors. A distribution built once before a loop whose every pass
backwards ``log_prob``/``entropy`` of it frees that graph at the first backward; the second
raises 'Trying to backward through the graph a second time' (checked on torch 2.13 for
Bernoulli, Binomial, Categorical, OneHotCategorical and Multinomial, by probs and by logits
where they take both; not ``Bernoulli(logits=...)``, ``Geometric``, ``Normal``, ``Beta``, whose
parameters are used as given: they run).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# distribution -> how many positional arguments come before ``probs`` (None: any argument)
_CACHING = {"Categorical": None, "OneHotCategorical": None, "Multinomial": None,
            "Bernoulli": 0, "Binomial": 1}


def caching_distributions(v: ast.AST | None, ctx: Context) -> list[ast.Call]:
    """The constructions in ``v`` of a distribution that keeps a tensor computed from its
    parameters (NOTE [caching distributions])."""
    out: list[ast.Call] = []
    for n in bfs_walk(v) if v is not None else ():
        if not isinstance(n, ast.Call):
            continue
        q = ctx.qualified_name(n.func) or ""
        if not q.startswith("torch.distributions."):
            continue
        name = q.rpartition(".")[2]
        if name not in _CACHING:
            continue
        before = _CACHING[name]
        if before is None or len(n.args) > before or any(k.arg == "probs" for k in n.keywords):
            out.append(n)
    return out
