"""GT528: a module keeps its recurrent state on `self` across calls without detaching it."""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.captured_targets import captured_targets
from gradtrace.lint.analysis.self_state import carried_state
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import function_scopes
from gradtrace.lint.rule import Bad, Good, Rule


class StateCarriedOnSelf(Rule):
    """A module method stores the output of one of its layers on `self` and feeds that
    attribute back into the layer on the next call, without `.detach()`
    (`out, self.hidden = self.lstm(x, self.hidden)`).

    Why: the stored state is on the graph of the call that made it, so the next call's graph
    runs through the previous one. The first `backward()` frees the earlier graph's saved
    tensors; the next backward reaches them and raises `RuntimeError: Trying to backward
    through the graph a second time` (pytorch-facts.md#backward-twice;
    sgadgil6/cnslab_fmri#4). With `retain_graph=True` it runs instead, and every step
    backpropagates through all earlier batches, ever slower. Detach the state where it is
    stored (`self.hidden = tuple(h.detach() for h in hidden)`) or reset it every batch.
    The previous value may reach the layer, or the stored value, through the method's local
    names (`h = index_select(self.state, 0, idx)`, `h = self.cell(x, h)`, `self.state =
    self.aggr(h)`), and the layer need not read it itself (`self.h = torch.tanh(self.fc(x) +
    self.h)`).
    The same chain is kept by a loss target a module captures from its input in one mode
    (`if self.mode == "capture": self.target = x`) and compares against in another
    (`self.loss = self.crit(x, self.target)`): every later backward runs into the capture
    call's graph (NOTE [captured targets]; neural-style-pt's masked style targets).
    A module with no layer of its own (a spiking neuron's `self.v = v`) carries the graph its
    input brings when the file builds it after a trained layer (NOTE [input fed by a layer]).
    Known limits: the layer must be an attribute of the same module, or the weighted layer
    before it in an `nn.Sequential` or in a method of its holder; any other assignment of the
    attribute outside `__init__` (a reset in the loop, a detached copy) or any
    `.detach()`/`.data` of it in the file is trusted, unless it sits in a def the script never
    reaches (NOTE [unreached defs]); the file must run `backward()` where it
    can run twice: in a function or in a loop (one backward at the end of a script-level episode
    that carried the state through all its steps is one backward through one graph).
    """

    code = "GT528"
    name = "state-carried-on-self"
    message = ("`self.{attr}` is given {how}: "
               "each call's graph runs into the previous call's, so the next `backward()` "
               "reaches a freed graph and raises 'Trying to backward through the graph a "
               "second time'; store it detached (`.detach()`) or reset it every batch")
    message_target = ("`self.{attr}` is stored with the graph of the `{method}` call that "
                      "captured it from its input, and a loss compares against it: every "
                      "`backward()` through that loss also runs into the capture call's graph "
                      "(the second through one capture raises 'Trying to backward through "
                      "the graph a second time'); store it detached")
    triggers = ("backward",)
    examples = [
        Bad("""
            import torch.nn as nn

            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cell = nn.GRU(4, 8)
                    self.out = nn.Linear(8, 2)
                    self.state = None

                def forward(self, x):
                    y, self.state = self.cell(x, self.state)
                    return self.out(y)

            def train(model, batches, opt):
                for x, t in batches:
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x)[-1], t).backward()
                    opt.step()
            """, at=(11, 8)),
        Bad("""
            import torch
            import torch.nn as nn

            class StyleLoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mode, self.crit = "none", nn.MSELoss()

                def forward(self, x):
                    if self.mode == "capture":
                        self.target = x @ x.t()
                    elif self.mode == "loss":
                        self.loss = self.crit(x @ x.t(), self.target)
                    return x

            def paint(net, style, img, opt, steps):
                net.mode = "capture"
                net(style)
                net.mode = "loss"
                for _ in range(steps):
                    opt.zero_grad()
                    net(img)
                    net.loss.backward()
                    opt.step()
            """, at=(11, 12)),
        Good("""
            import torch.nn as nn

            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cell = nn.GRU(4, 8)
                    self.out = nn.Linear(8, 2)
                    self.state = None

                def forward(self, x):
                    y, state = self.cell(x, self.state)
                    self.state = state.detach()
                    return self.out(y)

            def train(model, batches, opt):
                for x, t in batches:
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(x)[-1], t).backward()
                    opt.step()
            """),
        Good("""
            import torch.nn as nn

            class Tagger(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cell = nn.GRU(4, 8)
                    self.state = None

                def forward(self, x):
                    y, self.state = self.cell(x, self.state)
                    return y

            def train(model, batches, opt):
                for x, t in batches:
                    model.state = None
                    nn.functional.mse_loss(model(x), t).backward()
                    opt.step()
            """),
        Good("""
            import torch
            import torch.nn as nn

            class Bot(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cell = nn.GRUCell(4, 8)
                    self.head = nn.Linear(8, 1)
                    self.state = None

                def observe(self, x):
                    self.state = self.cell(x, self.state)

            bot = Bot()
            opt = torch.optim.SGD(bot.parameters(), lr=0.1)
            loss = 0
            for _ in range(3):
                bot.observe(torch.randn(2, 4))
                loss = loss + bot.head(bot.state).pow(2).mean()
            loss.backward()
            opt.step()
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        info = ctx.analysis.classes.get(node.name)
        if info is None or info.node is not node:
            return
        carries = carried_state(info, ctx)
        captures = captured_targets(info, ctx)
        if not (carries or captures) or not _backward_may_repeat(ctx):
            return
        for t in captures:  # NOTE [captured targets]
            yield dataclasses.replace(self.report(t.stmt, ctx, related=[Related(
                ctx.path, t.read.lineno, "a loss compares against it here",
                ctx.column(t.read))], attr=t.attr, how=""), message=self.message_target.format(
                attr=t.attr, method=t.method.name))
        for c in carries:
            note = "the layer before the module is built here" if c.fed else \
                "the layer reads the stored state here"
            related = [Related(ctx.path, c.layer.lineno, note,
                               ctx.column(c.layer))] if c.layer.lineno != c.stmt.lineno else []
            layer = ctx.source(c.layer.func) + "(...)"
            how = f"the output of `{layer}`, which read its previous value" if c.direct else \
                f"a value computed from its previous value through `{layer}`" if not c.fed \
                else (f"a value computed from its previous value and the input of "
                      f"`{c.method.name}`, which carries the graph of `{layer}` before it")
            yield self.report(c.stmt, ctx, related=related, attr=c.attr, how=how)


def _backward_may_repeat(ctx: Context) -> bool:
    """Whether some backward of the file can run more than once: one in a function, or one in
    a loop of the module body."""
    def find() -> bool:
        scopes = iter(function_scopes(ctx.tree))
        module = next(scopes)
        if any(step_calls(ctx, fn).backwards for fn in scopes):
            return True
        body = ctx.scope(module)
        return any(body.loops_of(b.stmt) for b in step_calls(ctx, module).backwards
                   if b.stmt is not None)
    return ctx.memo("backward-may-repeat", ctx.tree, find)
