"""LightningModule classes of a file and their optimization mode.

# NOTE [Lightning's backward]
Under automatic optimization (the default) Lightning's loop calls ``backward()`` on what a
LightningModule's ``training_step`` returns (a tensor, or a dict's ``'loss'``) and steps the
configured optimizers: that return is the loss, whatever the method does before it. A class
that sets ``automatic_optimization = False`` (in the class, ``__init__`` or a property, or a
class of the file it derives from or that derives from it) steps by hand, and its
``training_step`` returns only what it logs.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from gradtrace.lint.nodes import bfs_walk

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

LIGHTNING_MODULES = frozenset({
    "lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule", "lightning.pytorch.core.module.LightningModule",
    "pytorch_lightning.LightningModule", "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.module.LightningModule",
    "pytorch_lightning.core.lightning.LightningModule"})
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


def lightning_classes(tree: ast.Module, ctx: Context) -> dict[str, ast.ClassDef]:
    """The classes of the file that derive from a LightningModule (directly or through
    another class of the file), by name."""
    classes = {c.name: c for c in tree.body if isinstance(c, ast.ClassDef)}
    found: dict[str, ast.ClassDef] = {}
    changed = True
    while changed:
        changed = False
        for name, c in classes.items():
            if name in found:
                continue
            for b in c.bases:
                if (ctx.qualified_name(b) or "") in LIGHTNING_MODULES or \
                        (isinstance(b, ast.Name) and b.id in found):
                    found[name] = c
                    changed = True
                    break
    return found


def manual_optimization(c: ast.ClassDef) -> bool:
    """The class turns automatic optimization off (``self.automatic_optimization = False``, or
    a class attribute, or a property)."""
    for n in bfs_walk(c):
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
                if name == "automatic_optimization":
                    return True
        elif isinstance(n, FUNCS) and n.name == "automatic_optimization":
            return True
    return False


def class_chain(c: ast.ClassDef, found: dict[str, ast.ClassDef]) -> list[ast.ClassDef]:
    """``c`` and the classes of the file it derives from, and those deriving from it (a
    subclass may turn automatic optimization off for the ``training_step`` it inherits)."""
    out, todo = [], [c]
    while todo:
        k = todo.pop()
        if k in out:
            continue
        out.append(k)
        todo += [found[b.id] for b in k.bases if isinstance(b, ast.Name) and b.id in found]
        todo += [o for o in found.values() if any(isinstance(b, ast.Name) and b.id == k.name
                                                   for b in o.bases)]
    return out


def auto_training_step(ctx: Context, fn: ast.AST) -> bool:
    """``fn`` is the ``training_step`` of a LightningModule class of the file under automatic
    optimization: Lightning backpropagates what it returns (NOTE [Lightning's backward])."""
    if not isinstance(fn, FUNCS) or fn.name != "training_step":
        return False
    found = ctx.memo("lightning-classes", ctx.tree, lambda: lightning_classes(ctx.tree, ctx))
    owner = next((c for c in found.values() if fn in c.body), None)
    return owner is not None and not any(manual_optimization(k) for k in class_chain(owner, found))
