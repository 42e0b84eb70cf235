"""GT123: a module overrides ``train`` with a signature ``nn.Module.eval()`` cannot call.

# NOTE [train override that takes the mode second]
``nn.Module.eval()`` is ``return self.train(False)``, and ``nn.Module.train(mode)`` calls
``module.train(mode)`` on every child (torch 2.13 source). Both put the mode in the first
positional slot. A subclass that redefines ``train`` as its own API with a required first
parameter and the mode later (``def train(self, module_name, mode=True)``, Cornstarch's
freezing API, PR#53) receives ``False`` as ``module_name`` from ``model.eval()`` or from a
parent's ``.train()``/``.eval()``: the lookup of that part fails (or the wrong thing runs) and
evaluation crashes after training. What makes a parameter the mode is what the override does
with it, not its name: it is the argument the body hands to a ``.train(...)`` or
``.requires_grad_(...)`` call. Silent when the class (or a base class of the file) defines
``eval``, when the first parameter has a default, or when the first parameter is itself
handed on as a mode.
"""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule

MODE_SINKS = frozenset({"train", "requires_grad_"})


def _modes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the body of ``fn`` hands as the mode to ``.train(...)``/``.requires_grad_(...)``."""
    out: set[str] = set()
    for n in walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in MODE_SINKS:
            given = n.args[:1] + [k.value for k in n.keywords if k.arg in ("mode",
                                                                          "requires_grad")]
            out.update(a.id for a in given if isinstance(a, ast.Name))
    return out


class TrainOverrideBreaksEval(Rule):
    """A module overrides `train` with a parameter before the mode (`def train(self,
    module_name, mode=True)`) and defines no `eval`: `model.eval()` passes `False` as that
    first parameter.

    Why: `nn.Module.eval()` is `self.train(False)`, and `nn.Module.train(mode)` calls
    `child.train(mode)` on every child. An override whose first parameter is required and
    whose mode comes later (the value it hands to `.train(...)` or `.requires_grad_(...)`)
    gets `False` in the wrong slot from `model.eval()` or from a parent module's `.train()` /
    `.eval()`: the evaluation after training crashes (`ValueError: no module named False`)
    or does something else than switching modes (Cornstarch#53). Define `eval` (`def
    eval(self): return super().train(False)`) or keep the mode first.
    Known limits: only an override whose mode parameter is handed to a `.train(...)` or
    `.requires_grad_(...)` call in its body is recognised; `eval` defined on a base class
    outside the file is not seen.
    """

    code = "GT123"
    gate_statements = True
    name = "train-override-breaks-eval"
    message = ("`{cls}.train` takes `{first}` before the mode `{mode}`: `nn.Module.eval()` "
               "calls `self.train(False)` (and a parent's `.train(mode)` calls "
               "`child.train(mode)`), so `{first}` receives the bool and `eval()` fails; "
               "define `eval` (`return super().train(False)`) or take the mode first")
    triggers = ("train",)
    examples = [
        Bad("""
            from torch import nn

            class Multimodal(nn.Module):
                def __init__(self, encoder, lm):
                    super().__init__()
                    self.parts = nn.ModuleDict({"encoder": encoder, "lm": lm})

                def train(self, part, mode=True):
                    self.parts[part].train(mode)
                    self.parts[part].requires_grad_(mode)
                    return self
            """, at=(8, 4)),
        Good("""
            from torch import nn

            class Multimodal(nn.Module):
                def __init__(self, encoder, lm):
                    super().__init__()
                    self.parts = nn.ModuleDict({"encoder": encoder, "lm": lm})

                def train(self, part, mode=True):
                    self.parts[part].train(mode)
                    self.parts[part].requires_grad_(mode)
                    return self

                def eval(self):
                    return super().train(False)
            """),
        Good("""
            from torch import nn

            class Net(nn.Module):
                def train(self, mode=True, freeze_bn=False):
                    super().train(mode)
                    return self
            """),
    ]

    def visit_FunctionDef(self, node: ast.FunctionDef, ctx: Context) -> Iterator[Finding]:
        if node.name != "train":
            return
        cls = ctx.class_def
        info = ctx.analysis.classes.get(cls.name) if cls is not None else None
        if info is None or not info.is_module or info.methods.get("train") is not node:
            return
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args][1:]  # without self
        n_required = len(a.posonlyargs + a.args) - len(a.defaults) - 1
        if len(params) < 2 or n_required < 1:
            return  # `train(self, mode=True, ...)`: eval's False lands in the mode
        modes = _modes(node)
        later = [p for p in params[1:] if p in modes]
        if not later or params[0] in modes:
            return
        if any("eval" in c.methods for c in info.lineage()):
            return  # NOTE [train override that takes the mode second]
        yield self.report(node, ctx, cls=info.name, first=params[0], mode=later[0])

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]
