"""The analysis layer: facts about one file computed once, lazily, and shared by all rules.

``ctx.analysis`` (:class:`~gradtrace.lint.analysis.facts.Analysis`) holds them: the kinds of
names, attribute chains and call results (NOTE [kinds]), the file's classes with what they
register (NOTE [registration]), and what the file's own functions return. Name guesses, the
fallback, live in :mod:`gradtrace.lint.analysis.vocabulary`. Beside it: where a value comes
from and where it leaves the graph (:mod:`.origins`, over the one table of graph-cutting calls
in :mod:`.cuts`, and the file's helpers that cut what they return, :mod:`.helper_cuts`), which
sources of a value are made under grad-off (:mod:`.grad_sources`, following the file's helpers
in :mod:`.helper_sources`), which functions of the file return only values made under grad-off
(:mod:`.grad_off_returns`), which bindings a value is computed from and which hold a graph
(:mod:`.graph_deps`), all reading bindings through :mod:`.reach`; the training step's
backward/step/zero_grad/clip calls (:mod:`.steps`), and what happens to a module's parameters
(:mod:`.params`).
"""
from __future__ import annotations

from gradtrace.lint.analysis.facts import Analysis
from gradtrace.lint.analysis.kinds import Kind
from gradtrace.lint.analysis.modules import AttrInfo, ClassInfo

__all__ = ["Analysis", "AttrInfo", "ClassInfo", "Kind"]
