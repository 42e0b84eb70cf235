"""The name-reading methods of :class:`~.origins.Tracer`: what a container was filled with,
a slice write into a name, a parameter given a buffer, a name made trainable.

A base of :class:`~.origins.Tracer`, which supplies ``scope``, ``ctx``, ``trace``, ``_all``
and ``_busy``; holds no state of its own.
"""
from __future__ import annotations

from gradtrace.lint.analysis.cuts import DEAD, Cut, Trace
from gradtrace.lint.analysis.kinds import BUFFER, NUMBER
from gradtrace.lint.statement_shapes import slice_writes


class NameTraces:
    """The container and slice readings of :class:`~.origins.Tracer` (a base class only)."""

    def _slice_fed(self, name: str, line: int) -> bool:
        """A slice write before ``line`` puts a value that may carry a graph into ``name``
        (``buf = torch.zeros(...)``, then ``buf[:, 0] = logits[:, 0]``: the copy keeps the
        history), PLOP's distillation buffers filled from the model's logits."""
        writes = self.ctx.memo("origins-slice-writes", self.scope.node, lambda: slice_writes(
            self.scope)).get(name, ())
        for s in writes:
            if s.lineno >= line or (name, -s.lineno) in self._busy:
                continue
            self._busy.add((name, -s.lineno))
            try:
                if self.trace(s.value, s, s.lineno).live:
                    return True
            finally:
                self._busy.discard((name, -s.lineno))
        return False

    def _given_no_graph(self, name: str) -> bool:
        """Every call of the function in the file passes a registered buffer or a number for
        ``name`` (NOTE [parameter kinds]): moshi's ``_compute_entropy(self.cluster_usage)``,
        a statistic of a buffer, whose ops are never differentiated."""
        from gradtrace.lint.analysis.callees import param_kind
        k = param_kind(self.ctx.analysis, self.scope.node, name)
        return k is not None and k.what in (BUFFER, NUMBER)

    def _filled(self, name: str, line: int) -> Trace:
        """What ``name.append(x)`` / ``extend`` / ``insert`` put into a container."""
        if (name, -1) in self._busy:
            return DEAD
        self._busy.add((name, -1))
        try:
            return self._filled_uncached(name)
        finally:
            self._busy.discard((name, -1))

    def _filled_uncached(self, name: str) -> Trace:
        out = DEAD
        for mc in self.scope.method_calls:
            if mc.receiver == name and mc.method in ("append", "extend", "insert", "add",
                                                     "update", "setdefault"):
                t = self._all(mc.call.args, mc.stmt, mc.stmt.lineno)
                out = out | Trace(t.live, tuple(Cut(c.kind, c.node, c.operand,
                                                    ((name, mc.stmt.lineno),) + c.via)
                                                for c in t.cuts))
        return out

    def made_trainable(self, name: str) -> bool:
        """``name.requires_grad = ...`` or ``name.requires_grad_(...)`` somewhere in the scope."""
        if self.scope.bindings.get(name + ".requires_grad"):
            return True
        scope = self.scope  # the receivers, once per scope: asked for every name traced
        return name in self.ctx.memo("requires-grad-receivers", scope.node, lambda: {
            mc.receiver for mc in scope.method_calls if mc.method == "requires_grad_"})
