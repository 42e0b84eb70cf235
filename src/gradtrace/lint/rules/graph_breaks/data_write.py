"""GT113: `forward` writes values with history into a tensor through `.data`."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.analysis.kinds import MODULE, OBJECT, PARAMETER
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.context import Context
from gradtrace.lint.flow import Scope

from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration.construction import _forward_methods
from gradtrace.lint.nodes import child_nodes

COPIES = frozenset({"copy_", "index_copy_", "masked_scatter_", "scatter_", "index_put_"})
CUTS = frozenset({"detach", "item", "numpy", "tolist"})
WEIGHTS = frozenset({"weight", "bias"})


def _data_target(e: ast.AST) -> ast.Attribute | None:
    """``x.data`` in a write target ``x.data[...]`` / ``x.data[i][j]``."""
    key = None
    while isinstance(e, ast.Subscript):
        key, e = e.slice, e.value
    if not (isinstance(e, ast.Attribute) and e.attr == "data"):
        return None
    return None if _text(key) else e  # `g.nodes[t].data['h'] = ...`: a mapping (DGL's frames)


def _text(k: ast.AST | None) -> bool:
    """``k`` is a string (a literal, an f-string, ``'%s' % x``, ``'a' + b``,
    ``'{}'.format(x)``): a tensor cannot be indexed by one."""
    if isinstance(k, ast.Constant):
        return isinstance(k.value, str)
    if isinstance(k, ast.JoinedStr):
        return True
    if isinstance(k, ast.BinOp) and isinstance(k.op, (ast.Mod, ast.Add)):
        return _text(k.left)
    return isinstance(k, ast.Call) and isinstance(k.func, ast.Attribute) \
        and k.func.attr == "format" and _text(k.func.value)


def _weight(e: ast.AST, cls: ClassInfo) -> bool:
    """``e`` names a parameter: ``m.weight``/``m.bias``, or ``self.<p>`` registered as one."""
    if isinstance(e, ast.Attribute) and e.attr in WEIGHTS:
        return True
    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
        k = cls.attr_kind(e.attr)
        return k is not None and k.what == PARAMETER
    return False


def _layer_value(e: ast.AST, cls: ClassInfo, scope: Scope, line: int, depth: int = 0
                 ) -> ast.AST | None:
    """The node through which ``e`` carries the history of one of the module's layers or
    parameters (``self.visual.encode(x)``, ``self.prompt.weight``, a name bound to one in
    the method); None when it does not or it is cut (``.detach()``)."""
    if depth > 4:
        return None
    todo = [e]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in CUTS:
            continue
        if isinstance(n, ast.Attribute) and n.attr == "data" and _weight(n.value, cls):
            continue  # a weight's values copied (initialisation), not a computed result
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id == "self":
            k = cls.attr_kind(n.attr)
            if k is not None and k.what in (MODULE, PARAMETER):
                return n
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id != "self":
            b = scope.binding_before(n.id, line)
            if b is not None and b.value is not None and b.line < line and \
                    _layer_value(b.value, cls, scope, b.line, depth + 1) is not None:
                return n
            continue
        todo.extend(child_nodes(n))
    return None


class WriteThroughDataInForward(Rule):
    """`forward` writes values computed by the module's layers into a tensor through `.data`
    (`h.data[i, a:b] = feats[k]`, `emb.data[:, :n].copy_(self.prompt.weight)`).

    Why: a write through `.data` is invisible to autograd. The written values keep no link to
    what computed them, so the layers (or parameters) that produced them never get a gradient
    from the loss, silently, or the loss has no graph at all when they were its only trainable
    part (`RuntimeError: element 0 of tensors does not require grad`; QwenLM/Qwen-VL#124,
    where only the visual encoder was trained; checked on torch 2.13). The `.data` write is
    often a way around `a leaf Variable that requires grad is being used in an in-place
    operation` or a view error: write into a `clone()` instead (`h = h.clone();
    h[i, a:b] = feats[k]`), or build the tensor with `torch.cat`/`torch.where`.
    Known limits: the write must be in `forward` (or a method it calls) of a module of this
    file, and the written value must come, within that method, from one of the module's
    layers or parameters without a `.detach()`; a write into a weight (`new.weight.data[:n] =
    old.weight.data`, weight surgery) and a copy of a weight's `.data` are left alone, as is
    the `.data` attribute of a module or an object (`self.data[k] = v`: a dict it keeps).
    A Parameter's whole value replaced through `.data` by what the module's other parameters
    compute, the Parameter then used by the method (`self.mask.data = hard_sigmoid(s)`;
    `return self.mask`) is the same cut (NOTE [parameter replaced through .data, then used]).
    """

    code = "GT113"
    name = "write-through-data-in-forward"
    message = ("`{target}` writes `{value}` through `.data`: autograd does not see the write, "
               "so what computed `{value}` (`{source}`) gets no gradient from this path; write "
               "into a `clone()` (or build the tensor with `torch.cat`) instead")
    triggers = (".data",)  # a class whose lines spell no `.data` writes nothing through it
    gate_statements = True
    examples = [
        Bad("""
            import torch
            import torch.nn as nn
            class Prompted(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 8)
                    self.prompt = nn.Embedding(4, 8)
                    self.head = nn.Linear(8, 2)
                def forward(self, ids):
                    h = self.embed(ids)
                    p = self.prompt.weight.unsqueeze(0)
                    h.data[:, :4] = p
                    return self.head(h.mean(1))
            """, at=(12, 8)),
        Good("""
            import torch
            import torch.nn as nn
            class Prompted(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(100, 8)
                    self.prompt = nn.Embedding(4, 8)
                    self.head = nn.Linear(8, 2)
                def forward(self, ids, pad):
                    h = self.embed(ids).clone()
                    h[:, :4] = self.prompt.weight.unsqueeze(0)
                    h.data[pad] = 0.0
                    return self.head(h.mean(1))
            """),
        Good("""
            import torch.nn as nn
            class RelativeBias(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.bias = nn.Embedding(4, 2)
                    self.expand = True
                def forward(self, pos):
                    if self.expand:
                        new_bias = nn.Embedding(6, 2)
                        new_bias.weight.data[:4] = self.bias.weight.data
                        self.bias = new_bias
                    return self.bias(pos)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        cls = ctx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return
        for m in _forward_methods(cls):
            scope = ctx.scope(m)
            for s in scope.stmts:
                got = self._write(s)
                if got is None:
                    continue
                target, value = got
                owner = _data_target(target).value  # type: ignore[union-attr]
                whole = isinstance(target, ast.Attribute)  # `p.data = v`
                if (whole or _weight(owner, cls)) and not (
                        whole and _weight(owner, cls) and _replaced_then_used(s, m, owner, value)):
                    continue  # weight surgery (a resized embedding filled from the old one)
                k = ctx.analysis.kind(owner, scope, s.lineno)
                if k is not None and k.what in (MODULE, OBJECT):
                    continue  # `self.data[k] = v`: a module's own attribute, not Tensor.data
                src = _layer_value(value, cls, scope, s.lineno)
                if src is None:
                    continue
                yield self.report(s, ctx, target=ctx.source(target), value=ctx.source(value),
                                  source=ctx.source(_origin(src, scope, s.lineno)))

    @staticmethod
    def _write(s: ast.stmt) -> tuple[ast.AST, ast.AST] | None:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                and isinstance(s.targets[0], (ast.Subscript, ast.Attribute)) \
                and _data_target(s.targets[0]):
            return s.targets[0], s.value
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Attribute) and s.value.func.attr in COPIES \
                and _data_target(s.value.func.value) is not None and s.value.args:
            return s.value.func.value, s.value.args[-1]
        return None


def _replaced_then_used(s: ast.stmt, m: ast.AST, owner: ast.AST, value: ast.AST) -> bool:
    """# NOTE [parameter replaced through .data, then used]
    ``self.mask.data = hard_sigmoid(s)`` with ``s`` computed from another parameter
    (``self.loc``), then ``return self.mask``: the whole value of a registered Parameter is
    replaced through ``.data`` by what the module's other parameters compute, and the method
    goes on to use the Parameter, a leaf without that history, in place of the computed value
    (l0.pytorch issue 3: the gate locations get no gradient from the task). Not a write into
    a slice (weight surgery), nor a value that reads the written Parameter itself (an update
    of its own value: a running average, a renormalisation, a clamp)."""
    name = ast.dump(owner)
    if any(ast.dump(n) == name for n in ast.walk(value)):
        return False
    after = [n for n in ast.walk(m) if getattr(n, "lineno", 0) > s.end_lineno  # type: ignore[operator]
             and isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)]
    return any(ast.dump(n) == name for n in after)


def _origin(n: ast.AST, scope: Scope, line: int) -> ast.AST:
    """For a name, the value it was bound to (what computed it)."""
    if isinstance(n, ast.Name):
        b = scope.binding_before(n.id, line)
        if b is not None and b.value is not None:
            return b.value
    return n



