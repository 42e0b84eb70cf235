"""GT138: a setting that acts only on gradients given to the frozen one of two twin modules."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


class GradSettingOnFrozenTwin(Rule):
    """Of two modules of one class, the frozen one gets the setting that only acts on gradients.

    Why: a teacher/student (or online/target) pair builds one class twice, say
    `DINOProjectionHead(freeze_last_layer=1)` for the teacher and `DINOProjectionHead()` for the
    student. The class reads `freeze_last_layer` only in a method that changes its parameters'
    gradients (`cancel_last_layer_gradients` sets `p.grad = None`), and the training step calls
    that method on the student. The teacher's parameters are frozen (`requires_grad = False`):
    they never get a gradient, so the setting does nothing there, while the student keeps the
    default and its last layer trains from the first step, with no error (lightly's DINO
    benchmark). Pass the setting to the module whose gradients the method edits.
    Known limits: two `self.<attr> = Cls(...)` of one module class of the file in one method,
    one passing a keyword that the class stores on `self` and reads only in methods that write
    `.grad`, the other leaving it at its default; the first one's parameters frozen in the same
    method (`requires_grad = False` over its `parameters()`, or `requires_grad_(False)`); that
    gradient method called on the second one somewhere in the file.
    """

    code = "GT138"
    name = "grad-setting-on-frozen-twin"
    message = ("`self.{bare}` is built without `{kw}=`, which `{cls}` reads only in "
               "`{method}()` to change gradients, and the file calls `{method}()` on it; "
               "`self.{given}` gets `{kw}=` but its parameters are frozen (no gradient ever "
               "reaches them), so the setting does nothing and `self.{bare}` keeps the default")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch.nn as nn
            class Head(nn.Module):
                def __init__(self, freeze_last=-1):
                    super().__init__()
                    self.freeze_last = freeze_last
                    self.last = nn.Linear(4, 4)
                def cancel(self, epoch):
                    if epoch >= self.freeze_last:
                        return
                    for p in self.last.parameters():
                        p.grad = None
            class Dino(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = Head(freeze_last=1)
                    self.student_head = Head()
                    for p in self.head.parameters():
                        p.requires_grad = False
            model = Dino()
            model.student_head.cancel(0)
            """, at=(16, 8)),
        Good("""
            import torch.nn as nn
            class Head(nn.Module):
                def __init__(self, freeze_last=-1):
                    super().__init__()
                    self.freeze_last = freeze_last
                    self.last = nn.Linear(4, 4)
                def cancel(self, epoch):
                    if epoch >= self.freeze_last:
                        return
                    for p in self.last.parameters():
                        p.grad = None
            class Dino(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = Head()
                    self.student_head = Head(freeze_last=1)
                    for p in self.head.parameters():
                        p.requires_grad = False
            model = Dino()
            model.student_head.cancel(0)
            """),
    ]

    def visit_ClassDef(self, node: ast.ClassDef, ctx: Context) -> Iterator[Finding]:
        owner = ctx.analysis.classes.get(node.name)
        if owner is None or owner.node is not node or not owner.is_module:
            return
        for fn in owner.methods.values():
            built = _built(ctx, fn)
            by_cls: dict[str, list[tuple[str, ast.stmt, ast.Call]]] = {}
            for attr, s, call in built:
                by_cls.setdefault(call.func.id, []).append((attr, s, call))  # type: ignore[union-attr]
            for cls_name, items in by_cls.items():
                if len(items) != 2:
                    continue
                settings = _grad_settings(ctx, cls_name)
                for (given, _gs, gcall), (bare, bs, bcall) in (items, items[::-1]):
                    for kw in gcall.keywords:
                        method = settings.get(kw.arg or "")
                        if method is None or any(k.arg == kw.arg for k in bcall.keywords) \
                                or not _frozen(fn, given) or _frozen(fn, bare) \
                                or not _called_on(ctx.tree, bare, method):
                            continue
                        yield self.report(bs, ctx, related=[Related(
                            ctx.path, gcall.lineno, f"`{kw.arg}=` goes to the frozen "
                            f"`self.{given}` here")], bare=bare, kw=kw.arg, cls=cls_name,
                            method=method, given=given)


def _built(ctx: Context, fn: ast.AST) -> list[tuple[str, ast.stmt, ast.Call]]:
    """``self.<attr> = Cls(...)`` statements of ``fn`` for module classes of the file."""
    out = []
    for s in getattr(fn, "body", []):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Call) \
                and isinstance(s.value.func, ast.Name):
            t = s.targets[0]
            info = ctx.analysis.classes.get(s.value.func.id)
            if info is not None and info.is_module and isinstance(t, ast.Attribute) \
                    and dotted(t.value) == "self" and not s.value.args:
                out.append((t.attr, s, s.value))
    return out


def _grad_settings(ctx: Context, cls_name: str) -> dict[str, str]:
    """``__init__`` keyword -> the one method reading it, for keywords stored on ``self`` and
    read only in a method that writes ``.grad`` (NOTE: read by GT138 alone)."""
    info = ctx.analysis.classes.get(cls_name)
    init = info.methods.get("__init__") if info is not None else None
    if init is None:
        return {}
    params = {a.arg for a in (*init.args.args, *init.args.kwonlyargs)} - {"self"}
    stored = {}
    for s in init.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.value, ast.Name) \
                and s.value.id in params and isinstance(s.targets[0], ast.Attribute) \
                and dotted(s.targets[0].value) == "self":
            stored[s.targets[0].attr] = s.value.id
    out = {}
    for attr, param in stored.items():
        readers = [m for m in info.methods.values() if m is not init and any(  # type: ignore[union-attr]
            isinstance(n, ast.Attribute) and n.attr == attr and dotted(n.value) == "self"
            for n in ast.walk(m))]
        if len(readers) == 1 and _writes_grad(readers[0]):
            out[param] = readers[0].name
    return out


def _writes_grad(fn: ast.AST) -> bool:
    return any(isinstance(n, (ast.Assign, ast.AugAssign)) and any(
        isinstance(t, ast.Attribute) and t.attr == "grad"
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])) for n in ast.walk(fn))


def _frozen(fn: ast.AST, attr: str) -> bool:
    """``self.<attr>``'s parameters get ``requires_grad = False`` in ``fn``."""
    want = f"self.{attr}"
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr == "requires_grad_" and dotted(n.func.value) == want \
                and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value is False:
            return True
        if isinstance(n, (ast.For, ast.AsyncFor)) and isinstance(n.target, ast.Name) and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == "parameters" and dotted(c.func.value) == want
                for c in ast.walk(n.iter)) and any(
                isinstance(b, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    and isinstance(t.value, ast.Name) and t.value.id == n.target.id
                    for t in b.targets)
                and isinstance(b.value, ast.Constant) and b.value.value is False
                for b in n.body):
            return True
    return False


def _called_on(tree: ast.AST, attr: str, method: str) -> bool:
    """The file calls ``<...>.<attr>.<method>(...)``."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr == method and isinstance(n.func.value, ast.Attribute)
               and n.func.value.attr == attr for n in ast.walk(tree))
