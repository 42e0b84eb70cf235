"""A layer stored on a module past ``nn.Module.__setattr__`` (the instance ``__dict__``).

# NOTE [layer stored past registration]
``self.__dict__["head"] = nn.Linear(8, 2)``, ``vars(self)[name] = layer`` or
``object.__setattr__(self, name, layer)`` put the layer in the instance dict without going
through ``nn.Module.__setattr__``: it is not in ``_modules``, so ``model.parameters()``, the
optimizer built from it, ``.to()`` and ``state_dict()`` all miss it, while ``self.head(x)`` (or
``getattr(self, name)(x)``) still finds it by plain attribute lookup and calls it: its weights
get gradients at every backward() and are never stepped. Checked on torch 2.13: after such a
store the name is absent from ``named_children()`` and ``parameters()``, present in
``vars(module)``. Registered submodules live in ``_modules``, never in ``vars(module)``, so a
module found directly in ``vars(parent)`` of a module that ran is one stored this way.

The finding names the store: in the methods of the parent's class (its own and its bases',
from their source), the statement that writes the instance dict of ``self`` (a subscript store
on ``self.__dict__`` / ``vars(self)``, an ``object.__setattr__(self, ...)`` call, a
``self.__dict__.update(...)``), the one whose key is the attribute's name if a key is a
constant, else the single such statement of the class (a key computed in a loop).
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

import torch

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.module_record import holds


def _is_self(node: ast.expr, me: str) -> bool:
    return isinstance(node, ast.Name) and node.id == me


def _self_dict(node: ast.expr, me: str) -> bool:
    """``self.__dict__`` or ``vars(self)``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "__dict__" and _is_self(node.value, me)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        and node.func.id == "vars" and len(node.args) == 1 and _is_self(node.args[0], me)


def _stores(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[int, ast.expr | None]]:
    """(line, key expression or None) of each write to the instance dict of the method's
    ``self`` (its first positional parameter)."""
    if not fn.args.args:
        return []
    me = fn.args.args[0].arg
    out: list[tuple[int, ast.expr | None]] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(node.lineno, t.slice) for t in targets
                    if isinstance(t, ast.Subscript) and _self_dict(t.value, me)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if f.attr == "__setattr__" and isinstance(f.value, ast.Name) \
                    and f.value.id == "object" and len(node.args) == 3 \
                    and _is_self(node.args[0], me):
                out.append((node.lineno, node.args[1]))
            elif f.attr == "update" and _self_dict(f.value, me):
                out.append((node.lineno, None))
    return out


def store_site(cls: type, attr: str) -> Site | None:
    """The line that stored ``attr`` in the instance dict, in a method of ``cls`` or a base
    class with source (NOTE [layer stored past registration]); None if not found."""
    for k in cls.__mro__:
        if k.__module__.startswith("torch.") or k is object:
            continue
        named: list[Site] = []
        open_keys: set[Site] = set()
        for fn in list(vars(k).values()):
            fn = getattr(fn, "__func__", fn)
            if not inspect.isfunction(fn):
                continue
            try:
                lines, start = inspect.getsourcelines(fn)
                path = inspect.getsourcefile(fn) or ""
                tree = ast.parse(textwrap.dedent("".join(lines)))
            except (OSError, TypeError, SyntaxError):
                continue
            top = tree.body[0] if tree.body else None
            if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for ln, key in _stores(top):
                site = Site(path, start + ln - 1, fn.__name__)
                if isinstance(key, ast.Constant):
                    if key.value == attr:
                        named.append(site)
                else:
                    open_keys.add(site)
        if named:
            return named[0]
        if len(open_keys) == 1:
            return next(iter(open_keys))
    return None


def bypassed_store(data: Any, module: torch.nn.Module
                   ) -> tuple[Site | None, str, str] | None:
    """``(site, why, fix)`` when ``module`` is held directly in the instance dict of a module
    that ran and is not one of its registered submodules, else None."""
    for rec in list(data.modules.values()):
        parent = rec.ref()
        if parent is None or parent is module:
            continue
        for attr, value in vars(parent).items():
            if isinstance(value, torch.nn.Module) and holds(value, module) \
                    and not any(m is module for m in parent.modules()):
                return (store_site(type(parent), attr),
                        f"the layer was stored in the instance __dict__ of "
                        f"{type(parent).__name__}, past "
                        "nn.Module.__setattr__, so it is not registered as a submodule and "
                        "model.parameters() misses it",
                        "assign it with self.<name> = layer (or setattr(self, name, layer) / "
                        "self.add_module(name, layer))")
    return None
