"""The shared base of the in-place rules on a saved output (GT602, GT603): from each op that
saves its output for backward and is bound to a name, the later in-place writes into it."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Related
from gradtrace.lint.analysis.selectors import only_selects
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Rule
from gradtrace.lint.rules.inplace._class_writes import class_writes
from gradtrace.lint.rules.inplace._local_calls import class_instance_writes, local_module_writes
from gradtrace.lint.rules.inplace._saved import (
    Producer, _candidate_writes, _has_module_word, _in_training, _input_has_no_grad,
    _LazyModules,
)

Write = tuple  # (Producer, write statement, kind, target node, backward call or True)


class InplaceRule(Rule):
    """Shared visitor: from each saved-output op bound to a name, find later in-place writes."""

    triggers = ("sigmoid", "softmax", "tanh", "exp(", "expm1", "relu", "elu(", "sqrt",
                "reciprocal", "expit", "act(", "activation(", "act_fn(", "eigh(")

    @staticmethod
    def _modules(ctx: Context) -> _LazyModules:
        """The activation modules of the enclosing class, once per class and file."""
        cls = ctx.class_def
        ok = ctx.memo("gt6-module-words", ctx.tree, lambda: _has_module_word(ctx.code) or any(
            c.is_module for c in ctx.analysis.classes.values()))  # blocks of the file
        return ctx.memo("gt6-modules", cls or ctx.tree, lambda: _LazyModules(cls, ctx, ok))

    def _writes(self, node: ast.Call, ctx: Context, families: tuple[str, ...],
                kinds: tuple[str, ...] | None = None) -> Iterator[Write]:
        """In-place writes into the output ``node`` produces, of the given families/kinds,
        that run before a backward (or in a training forward)."""
        seen: set[int] = ctx.memo("gt6-reported-" + self.code, ctx.tree, set)
        for prod, s, kind, target, fn in _candidate_writes(node, ctx, self._modules):
            if prod.family not in families or (kinds is not None and kind not in kinds) \
                    or id(s) in seen or _input_has_no_grad(prod, ctx) \
                    or only_selects(ctx.scope(), prod.call):
                continue  # no history in, or the output only compared / made indices:
                # backward never runs the op (NOTE [output never differentiated])
            training = _in_training(ctx, fn, s, prod)
            if training:
                seen.add(id(s))
                yield prod, s, kind, target, training
        # `gate = nn.Sigmoid()`: its calls (`h = gate(x)`) need not name an op
        for prod, s, kind, target, training in local_module_writes(node, ctx, self._modules):
            if prod.family in families and (kinds is None or kind in kinds) \
                    and id(s) not in seen:
                seen.add(id(s))
                yield prod, s, kind, target, training

    def _instance_writes(self, ctx: Context, families: tuple[str, ...],
                         kinds: tuple[str, ...] | None = None) -> Iterator[Write]:
        """The writes into the outputs of a local instance of a module class of the file
        (``crit = RootLoss()``, then ``loss = crit(out, y); loss -= reg``): :func:`._local_calls.
        class_instance_writes`, each write once per rule."""
        seen: set[int] = ctx.memo("gt6-reported-" + self.code, ctx.tree, set)
        for prod, s, kind, target, training in class_instance_writes(ctx, self._modules):
            if prod.family in families and (kinds is None or kind in kinds) \
                    and id(s) not in seen:
                seen.add(id(s))
                yield prod, s, kind, target, training

    def _block_writes(self, ctx: Context, *specs: tuple[tuple[str, ...], tuple[str, ...]]
                      ) -> Iterator[tuple[Producer, ast.stmt, ast.AST]]:
        """:func:`._class_writes.class_writes` of every module class of the file, for each (families,
        kinds) of ``specs``, each write once per rule."""
        seen: set[int] = ctx.memo("gt6-reported-" + self.code, ctx.tree, set)
        for info in list(ctx.analysis.classes.values()):
            if not info.is_module:
                continue
            for families, kinds in specs:
                for prod, stmt, target in class_writes(info.node, ctx, families, kinds):
                    if id(stmt) not in seen:
                        seen.add(id(stmt))
                        yield prod, stmt, target

    def _related(self, prod: Producer, training: ast.Call | bool, ctx: Context) -> list[Related]:
        rel = [Related(ctx.path, prod.call.lineno,  # type: ignore[attr-defined]
                       f"`{prod.op}` saves its output for backward here",
                       ctx.column(prod.call))]
        if isinstance(training, ast.Call):
            rel.append(Related(ctx.path, training.lineno,
                               f"`{ctx.source(training)}` raises 'one of the variables needed "
                               "for gradient computation has been modified by an inplace "
                               "operation' here", ctx.column(training)))
        return rel
