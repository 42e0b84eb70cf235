"""GT132: a module's mode setter (``self.train()`` / ``self.eval()``) used as a condition.

# NOTE [mode setter as a test]
``nn.Module.train(mode=True)`` sets ``training`` on the module and on every submodule and
returns ``self``; ``eval()`` is ``train(False)`` (pytorch-facts.md#none-returning-methods). A
module is always true (``object.__bool__``) unless its class defines ``__bool__`` or ``__len__``
(``nn.Sequential``, ``nn.ModuleList``, ``nn.ModuleDict`` do: an empty one is false). So
``if self.train():`` in place of ``if self.training:`` (the ETM replication's
``reparameterize``) takes the training arm at every call, also under ``model.eval()``, and
switches the whole model back to training mode there: dropout and batch-norm statistics run in
the evaluation that follows. Judged only on ``self`` in a method of an ``nn.Module`` subclass of
the file whose lineage is made of classes of the file and ``torch.nn.Module`` (another base may
redefine ``train``, or be a container with a length), none of which defines ``train``, ``eval``,
``__bool__`` or ``__len__``.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

SETTERS = frozenset({"train", "eval"})
TRUTH = frozenset({"train", "eval", "__bool__", "__len__"})


def _conditions(test: ast.AST) -> Iterator[ast.AST]:
    """``test`` and the operands whose truth it takes (``a and b``, ``not a``)."""
    yield test
    if isinstance(test, ast.BoolOp):
        for v in test.values:
            yield from _conditions(v)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _conditions(test.operand)


def _plain_module(cls: ast.ClassDef, ctx: Context) -> str | None:
    """The name of ``cls`` when it is an ``nn.Module`` of the file whose ``train``/``eval``
    and truth are ``nn.Module``'s (NOTE [mode setter as a test])."""
    info = ctx.analysis.classes.get(cls.name)
    if info is None or not info.is_module or info.node is not cls:
        return None
    for c in info.lineage():
        if TRUTH & c.methods.keys():
            return None
        for b in c.node.bases:
            if isinstance(b, ast.Name) and b.id in ctx.analysis.classes:
                continue
            if ctx.qualified_name(b) != "torch.nn.Module":
                return None
    return info.name


class ModeSetterAsCondition(Rule):
    """`if self.train():` tests the module's mode setter, which switches the mode and returns
    the module (always true), instead of reading the `self.training` flag.

    Why: `nn.Module.train()` sets training mode on the module and every submodule and returns
    the module itself; `eval()` is `train(False)`. A module is always true, so the test takes
    the same arm at every call, and evaluation under `model.eval()` is switched back to
    training mode where the test runs: dropout stays on, batch-norm statistics keep moving, a
    latent sample is drawn instead of the mean (the ETM replication's `reparameterize`).
    Read `self.training` instead.
    Known limits: only `self.train(...)`/`self.eval()` in a method of an `nn.Module` subclass
    of the file whose bases are `nn.Module` or classes of the file that do not redefine
    `train`, `eval`, `__bool__` or `__len__` (a container module with no element is false).
    """

    code = "GT132"
    gate_statements = True
    name = "mode-setter-as-condition"
    message = ("`self.{setter}()` in a condition switches `{cls}` (and its submodules) to "
               "{mode} mode and returns the module, which is always true: read "
               "`self.training` instead")
    triggers = (".train(", ".eval(")
    examples = [
        Bad("""
            import torch
            from torch import nn

            class VAE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 4)

                def forward(self, x):
                    mu = self.enc(x)
                    if self.train():
                        return mu + torch.randn_like(mu)
                    return mu
            """, at=(11, 11)),
        Bad("""
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    return x if not self.eval() else x * 2
            """, at=(5, 24)),
        Good("""
            import torch
            from torch import nn

            class VAE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.enc = nn.Linear(8, 4)

                def forward(self, x):
                    mu = self.enc(x)
                    if self.training:
                        return mu + torch.randn_like(mu)
                    return mu

            class Agent(nn.Module):
                def train(self, steps=10):
                    return steps > 0

                def act(self, x):
                    if self.train():
                        return x
                    return -x

            class Blocks(nn.Sequential):
                def check(self):
                    if self.eval():
                        return True
            """),
    ]

    def _judge(self, test: ast.AST, ctx: Context) -> Iterator[Finding]:
        cls = ctx.class_def
        if cls is None or ctx.function is None:
            return
        for c in _conditions(test):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) \
                    and c.func.attr in SETTERS and isinstance(c.func.value, ast.Name) \
                    and c.func.value.id == "self" and (name := _plain_module(cls, ctx)):
                off = c.func.attr == "eval" or bool(
                    c.args and isinstance(c.args[0], ast.Constant) and not c.args[0].value)
                yield self.report(c, ctx, setter=c.func.attr, cls=name,
                                  mode="evaluation" if off else "training")

    def visit_If(self, node: ast.If, ctx: Context) -> Iterator[Finding]:
        yield from self._judge(node.test, ctx)

    visit_While = visit_If  # type: ignore[assignment]
    visit_Assert = visit_If  # type: ignore[assignment]

    def visit_IfExp(self, node: ast.IfExp, ctx: Context) -> Iterator[Finding]:
        yield from self._judge(node.test, ctx)
