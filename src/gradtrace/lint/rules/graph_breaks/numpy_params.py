"""GT114: a NumPy function (or ``.numpy()``) given a Parameter that requires grad."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import PARAMETER
from gradtrace.lint.analysis.param_attrs import asks_no_grad, file_freezes
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules._gates import file_says_word


class NumpyOfTrainableParameter(Rule):
    """A NumPy function (`np.copy(p)`, `np.array(p)`) or `p.numpy()` is given a Parameter that
    requires grad.

    Why: NumPy reads a tensor through `Tensor.numpy()`, which refuses a tensor that requires
    grad whatever the grad mode: `RuntimeError: Can't call numpy() on Tensor that requires
    grad. Use tensor.detach().numpy() instead.` (EdgeML Bonsai's hard thresholding,
    `np.copy(self.bonsaiObj.W)`; checked on torch 2.13). Read `p.detach().cpu().numpy()`
    (or `p.data`). What the value is comes from the code: a Parameter made by
    `nn.Parameter(...)` in a class of this file, reached through attributes and through the
    objects a constructor was given (`BonsaiTrainer(Bonsai())` keeping `self.bonsaiObj`).
    Known limits: a Parameter made with `requires_grad=False`, or any file that freezes
    something (`requires_grad = False`, `requires_grad_(False)`), is left alone.
    """

    code = "GT114"
    name = "numpy-of-trainable-parameter"
    message = ("`{call}` reads `{param}`, a Parameter that requires grad, through NumPy: "
               "raises `RuntimeError: Can't call numpy() on Tensor that requires grad`; "
               "use `{param}.detach().cpu().numpy()`")
    triggers = ("numpy",)
    gate_statements = True
    examples = [
        Bad("""
            import numpy as np
            import torch
            import torch.nn as nn
            class Bonsai(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.W = nn.Parameter(torch.randn(3, 4))
            class Trainer:
                def __init__(self, model):
                    self.model = model
                def prune(self):
                    w = np.copy(self.model.W)
                    return w
            Trainer(Bonsai()).prune()
            """, at=(12, 12)),
        Good("""
            import numpy as np
            import torch
            import torch.nn as nn
            class Bonsai(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.W = nn.Parameter(torch.randn(3, 4))
            class Trainer:
                def __init__(self, model):
                    self.model = model
                def prune(self):
                    w = np.copy(self.model.W.detach().numpy())
                    return w
            Trainer(Bonsai()).prune()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr == "numpy" and not node.args:
            target = f.value
        elif node.args and (ctx.qualified_name(f) or "").startswith("numpy."):
            target = node.args[0]
        else:
            return
        if not isinstance(target, (ast.Name, ast.Attribute)) \
                or not file_says_word(ctx, "Parameter"):
            return  # (the kind needs a `torch.nn.Parameter(...)` call of this file, spelled
            # `Parameter` at the call or in the import that names it: NOTE [word gates])
        k = ctx.analysis.kind(target)
        if k is None or k.what != PARAMETER or not isinstance(k.node, ast.Call) \
                or asks_no_grad(k.node) or file_freezes(ctx):
            return
        rel = [Related(ctx.path, k.node.lineno, "the Parameter is made here",
                       ctx.column(k.node))]
        yield self.report(node, ctx, related=rel, call=ctx.source(f) + "(...)",
                          param=ctx.source(target))
