"""GT136: a freeze method copied from its sibling still freezes the sibling's submodule."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.sibling_parts import part_flags
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule


class FreezeMethodCopiedFromSibling(Rule):
    """A method named for one submodule sets `requires_grad` on another, as its sibling does.

    Why: `freeze_encoder()` freezes `self.encoder`; `freeze_decoder()`, written as a copy of it,
    still freezes `self.encoder` and never touches `self.decoder` (TerraTorch's
    `PixelWiseModel.freeze_decoder`). A task configured to keep the decoder fixed then trains
    the decoder and leaves the encoder exactly as loaded, with no error: the optimizer built
    from the trainable parameters simply holds the wrong part. Set the flag on the submodule
    the method is named for.
    Known limits: a module class of the file with two methods whose names differ only by the
    names of two of its submodules (`freeze_encoder` / `freeze_decoder`, `unfreeze_head` /
    `unfreeze_backbone`); both set the same constant `requires_grad` on the parameters of the
    first submodule (`self.x.requires_grad_(False)`, a loop over `self.x.parameters()`, or a
    function or method of the file handed `self.x` that does so), and the second method never
    reads the submodule its name names.
    """

    code = "GT136"
    name = "freeze-method-copied-from-sibling"
    message = ("`{method}()` sets `requires_grad` on `self.{done}`, as `{sibling}()` does, and "
               "never touches `self.{named}`: a copy of its sibling left unchanged, so "
               "`self.{named}` keeps its flag and `self.{done}` gets this one instead")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch.nn as nn
            def freeze(module):
                for p in module.parameters():
                    p.requires_grad_(False)
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(4, 4)
                    self.decoder = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 2)
                def freeze_encoder(self):
                    freeze(self.encoder)
                def freeze_decoder(self):
                    freeze(self.encoder)
                    freeze(self.head)
            """, at=(14, 8)),
        Bad("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.backbone = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 2)
                def unfreeze_backbone(self):
                    for p in self.backbone.parameters():
                        p.requires_grad = True
                def unfreeze_head(self):
                    for p in self.backbone.parameters():
                        p.requires_grad = True
            """, at=(11, 8)),
        Good("""
            import torch.nn as nn
            def freeze(module):
                for p in module.parameters():
                    p.requires_grad_(False)
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(4, 4)
                    self.decoder = nn.Linear(4, 4)
                    self.head = nn.Linear(4, 2)
                def freeze_encoder(self):
                    freeze(self.encoder)
                def freeze_decoder(self):
                    freeze(self.decoder)
                    freeze(self.head)
            """),
        Good("""
            import torch.nn as nn
            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(4, 4)
                    self.decoder = nn.Linear(4, 4)
                def freeze_encoder(self):
                    self.encoder.requires_grad_(False)
                def freeze_decoder(self):
                    self.encoder.requires_grad_(False)  # the decoder reads the encoder's codes
                    self.decoder.requires_grad_(False)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module or len(cls.methods) < 3:
            return
        named_any = [a for a in cls.attrs if any(_names(m, a) for m in cls.methods)]
        if len(named_any) < 2:  # cheap first: two attributes that methods are named for
            return
        parts = [a for a in cls.attrs if cls.attr_kind(a) is not None
                 and cls.attr_kind(a).what == MODULE]  # type: ignore[union-attr]
        if len(parts) < 2:
            return
        named = {m: [p for p in parts if _names(m, p)] for m in cls.methods}
        for m_b, fn_b in cls.methods.items():
            for b in named[m_b]:
                for a in parts:
                    m_a = _swap(m_b, b, a)
                    fn_a = cls.methods.get(m_a) if m_a else None
                    if fn_a is None or a == b or _reads(fn_b, b):
                        continue
                    flags_a = part_flags(ctx, fn_a).get(a)
                    flags_b = part_flags(ctx, fn_b).get(a)
                    if not flags_a or not flags_b or flags_a[0][1] != flags_b[0][1]:
                        continue
                    rel = [Related(ctx.path, flags_a[0][0].lineno,
                                   f"`{m_a}()` sets the same flag on `self.{a}` here",
                                   ctx.column(flags_a[0][0]))]
                    yield self.report(flags_b[0][0], ctx, related=rel, method=m_b, done=a,
                                      sibling=m_a, named=b)


def _names(method: str, part: str) -> bool:
    """``part`` is one or more whole ``_``-separated words of the method's name."""
    return f"_{part}_" in f"_{method}_"


def _swap(method: str, old: str, new: str) -> str | None:
    """The method's name with the words ``old`` replaced by ``new`` (once)."""
    padded = f"_{method}_"
    if padded.count(f"_{old}_") != 1:
        return None
    return padded.replace(f"_{old}_", f"_{new}_")[1:-1]


def _reads(fn: ast.AST, part: str) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == part and isinstance(n.value, ast.Name)
               and n.value.id == "self" for n in ast.walk(fn))
