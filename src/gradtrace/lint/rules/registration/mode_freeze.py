"""GT128: a mode switch of a module leaves a submodule frozen by the switch to another mode."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.mode_switches import kept_freezes
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

_PHASES = """
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(4, 4)
            self.pre_head = nn.Linear(4, 4)
            self.cls_head = nn.Linear(4, 2)
            self.pretrain_mode()
        def pretrain_mode(self):
            self.forward = self.pre_step{restore}
        def probe_mode(self, freeze=True):
            self.forward = self.probe_step
            self.encoder.requires_grad_(not freeze)
        def pre_step(self, x):
            return self.pre_head(self.encoder(x))
        def probe_step(self, x):
            return self.cls_head(self.encoder(x))
    def train(net, x):
        net.pretrain_mode()
        opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
        net(x).pow(2).mean().backward()
        opt.step()
    net = Net()
    net.probe_mode(freeze=True)
    train(net, torch.randn(2, 4))
    """


class FreezeKeptAcrossModeSwitch(Rule):
    """A method that switches a module to one mode leaves a submodule frozen by the method
    that switches it to another mode, although this mode runs that submodule.

    Why: `set_second_phase(freeze_encoder=True)` freezes `self.encoder` for a linear probe;
    `set_first_phase()` swaps `forward` back to pretraining but never sets
    `requires_grad` again, so pretraining resumed after a probe trains only the heads and the
    encoder silently stays where the probe left it (TabularS3L; `requires_grad_` sticks to the
    parameters until set again, checked on torch 2.13). Set the flag back in every switch
    (`self.encoder.requires_grad_(True)`).
    Known limits: the switches are methods of one module class of the file assigning the same
    `self` attribute as a statement of their body (NOTE [mode switches]); the file must call
    the freezing switch (with an argument that may freeze) and call this switch on an
    instance before a `backward()` in the same function; a switch that sets `requires_grad`
    on anything, or hands a `self` attribute to a call, is taken to restore it.
    """

    code = "GT128"
    name = "freeze-kept-across-mode-switch"
    message = ("`{attr}` switches to another mode here, but `{sub}` stays frozen by `{freezer}` "
               "(line {line}) and this mode runs it: training after `{switch}()` never updates "
               "`{sub}`; set `{sub}.requires_grad_(True)` here")
    triggers = ("requires_grad",)
    gate_statements = True
    examples = [
        Bad(_PHASES.format(restore=""), at=(11, 8)),
        Good(_PHASES.format(restore="\n            self.encoder.requires_grad_(True)")),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        info = ctx.analysis.classes.get(node.name)
        if info is None or info.node is not node or not ctx.mentions(".backward("):
            return
        seen: set[int] = set()
        for k in kept_freezes(ctx, info):
            if id(k.assign) in seen:
                continue
            seen.add(id(k.assign))
            yield self.report(k.assign, ctx, related=[
                Related(ctx.path, k.freeze.lineno, f"`{k.sub}` frozen here",
                        ctx.column(k.freeze)),
                Related(ctx.path, k.call.lineno, "training in this mode starts here",
                        ctx.column(k.call))],
                attr=ast.unparse(k.assign.targets[0]), sub=k.sub, freezer=k.freezer.name,
                line=k.freeze.lineno, switch=k.switch.name)
