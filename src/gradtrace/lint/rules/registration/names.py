"""GT417: a submodule, parameter or buffer registered under a name torch rejects."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good, Rule

# the public attributes of an nn.Module instance (torch 2.13 `dir(nn.Module)` and `training`):
# registering a child, parameter or buffer under one of them raises "attribute 'x' already
# exists"
MODULE_ATTRS = frozenset({
    "T_destination", "add_module", "apply", "bfloat16", "buffers", "call_super_init", "children",
    "compile", "cpu", "cuda", "double", "dump_patches", "eval", "extra_repr", "float", "forward",
    "get_buffer", "get_extra_state", "get_parameter", "get_submodule", "half", "ipu",
    "load_state_dict", "modules", "mtia", "named_buffers", "named_children", "named_modules",
    "named_parameters", "parameters", "register_backward_hook", "register_buffer",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_load_state_dict_post_hook",
    "register_load_state_dict_pre_hook", "register_module", "register_parameter",
    "register_state_dict_post_hook", "register_state_dict_pre_hook", "requires_grad_",
    "set_extra_state", "set_submodule", "share_memory", "state_dict", "to", "to_empty", "train",
    "type", "xpu", "zero_grad", "training"})
DICT_ATTRS = {"torch.nn.ModuleDict": frozenset({"clear", "items", "keys", "pop", "update",
                                                "values"}),
              "torch.nn.ParameterDict": frozenset({"clear", "copy", "fromkeys", "get", "items",
                                                   "keys", "pop", "popitem", "setdefault",
                                                   "update", "values"})}
DICT_ATTRS["torch.nn.modules.container.ModuleDict"] = DICT_ATTRS["torch.nn.ModuleDict"]
DICT_ATTRS["torch.nn.modules.container.ParameterDict"] = DICT_ATTRS["torch.nn.ParameterDict"]
REGISTER = {"add_module": "module", "register_module": "module", "register_buffer": "buffer",
            "register_parameter": "parameter"}
# the keyword of the registered value: each torch method requires it (a name alone is a
# registry's decorator, mmcv's `@MODELS.register_module('a.b')`)
VALUE_ARG = {"add_module": "module", "register_module": "module", "register_buffer": "tensor",
             "register_parameter": "param"}


def _dotted_text(e: ast.AST) -> str | None:
    """The text of a constant name, or the constant part of a built one (an f-string, ``'a.%d'
    % i``, ``'a.{}'.format(i)``) when that part holds a dot (the built name then holds it
    too); None otherwise."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    if isinstance(e, ast.JoinedStr):
        text = "".join(v.value for v in e.values if isinstance(v, ast.Constant))
        return text if "." in text else None
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod) and isinstance(e.left, ast.Constant) \
            and isinstance(e.left.value, str):
        return e.left.value if "." in e.left.value.replace("%.", "%") else None
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == "format" \
            and isinstance(e.func.value, ast.Constant) and isinstance(e.func.value.value, str):
        text = e.func.value.value
        return text if "." in text.split("{")[0] + "".join(p.split("}", 1)[-1]
                                                           for p in text.split("{")[1:]) else None
    return None


def _constant_keys(name: str, ctx: Context, line: int) -> list[ast.expr]:
    """The constant keys of the dict (or the items of the list/tuple) ``name`` is bound to,
    once, in the current scope or at the top of the file."""
    for scope in (ctx.scope(), ctx.scope(ctx.tree)):
        bs = scope.bindings.get(name, ())
        if len(bs) == 1 and bs[0].value is not None:
            v = bs[0].value
            items = v.keys if isinstance(v, ast.Dict) else v.elts \
                if isinstance(v, (ast.List, ast.Tuple, ast.Set)) else []
            return [k for k in items if isinstance(k, ast.Constant)]
        if bs:
            return []
    return []


def _comprehension_keys(comp: ast.DictComp, ctx: Context) -> list[ast.expr]:
    """``{k: ... for k, v in TASKS.items()}`` / ``for k in NAMES``: the constant keys the
    comprehension takes from a dict or list bound once in the file, placed at ``comp``."""
    if len(comp.generators) != 1 or not isinstance(comp.key, ast.Name):
        return []
    gen = comp.generators[0]
    it, target = gen.iter, gen.target
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and not it.args \
            and it.func.attr in ("items", "keys"):
        if it.func.attr == "items":
            target = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else None
        it = it.func.value
    if not isinstance(it, ast.Name) or not isinstance(target, ast.Name) \
            or target.id != comp.key.id:
        return []
    return [ast.copy_location(ast.Constant(k.value), comp)
            for k in _constant_keys(it.id, ctx, comp.lineno)]


def _problem(name: ast.AST, taken: frozenset[str]) -> str | None:
    """Why torch rejects ``name`` (a dot, empty, an attribute of the module), or None."""
    text = _dotted_text(name)
    if text is None:
        return None
    if "." in text:
        return "holds a '.' (torch raises KeyError: names can't contain \".\")"
    if text == "":
        return "is empty (torch raises KeyError: names can't be empty)"
    if isinstance(name, ast.Constant) and text in taken:
        return (f"is an attribute every nn.Module has (torch raises KeyError: attribute "
                f"'{text}' already exists)")
    return None


def _remedy(why: str) -> str:
    return "use `_` instead of `.`" if "'.'" in why else "use another name"


class RegisteredNameRejected(Rule):
    """A submodule, parameter or buffer is registered under a name torch rejects.

    Why: `add_module`, `register_buffer` and `register_parameter` (and `nn.ModuleDict` /
    `nn.ParameterDict`, which call them for every key) refuse a name that holds a `.` (the
    separator of `state_dict` keys and `get_submodule` paths), an empty name, and a name that
    is already an attribute of the module (`type`, `forward`, `train`, `training`, `to`...,
    and a ModuleDict's own `keys`/`items`/`update`...). Each raises `KeyError` when the model
    is built (DenseNet's `add_module('norm.1', ...)`; a multi-task head keyed `'type'`).
    Use `_` instead of `.` (`'norm_1'`), or another key (`'type_head'`).
    Known limits: constant names and keys, and f-strings or `%`/`format` templates whose
    constant part holds a dot. A call that registers no value (a name only: mmcv's
    `@MODELS.register_module('a.b')` decorator) is not torch's and is not reported.
    """

    code = "GT417"
    name = "registered-name-rejected"
    message = "the {what} name {name} {why}; {remedy}"
    triggers = ("add_module", "register_module", "register_buffer", "register_parameter",
                "ModuleDict", "ParameterDict")
    examples = [
        Bad("""
            import torch.nn as nn

            class DenseLayer(nn.Sequential):
                def __init__(self, c):
                    super().__init__()
                    self.add_module("norm.1", nn.BatchNorm2d(c))
            """, at=(6, 24)),
        Bad("""
            import torch.nn as nn
            heads = nn.ModuleDict({"type": nn.Linear(8, 3), "color": nn.Linear(8, 5)})
            """, at=(2, 23)),
        Good("""
            import torch.nn as nn

            class DenseLayer(nn.Sequential):
                def __init__(self, c, i):
                    super().__init__()
                    self.add_module("norm1", nn.BatchNorm2d(c))
                    self.add_module(f"denselayer{i + 1}", nn.ReLU())
            heads = nn.ModuleDict({"kind": nn.Linear(8, 3), "color": nn.Linear(8, 5)})
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in REGISTER:
            name = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("name", "target")), None)
            if name is None or len(node.args) < 2 and not any(
                    k.arg == VALUE_ARG[f.attr] for k in node.keywords):
                return  # no value registered: not torch's method (a registry's)
            k = ctx.analysis.kind(f.value, None, node.lineno)
            if k is not None and not k.is_module:
                return
            why = _problem(name, MODULE_ATTRS)
            if why is not None:
                shown = repr(name.value) if isinstance(name, ast.Constant) else ctx.source(name)
                yield self.report(name, ctx, what=REGISTER[f.attr], name=shown[:40], why=why,
                                  remedy=_remedy(why))
            return
        q = ctx.qualified_name(f) or ""
        if q not in DICT_ATTRS or not node.args and not node.keywords:
            return
        taken = MODULE_ATTRS | DICT_ATTRS[q]
        what = "module" if "Module" in q else "parameter"
        arg = node.args[0] if node.args else None
        keys: list[ast.AST] = []
        if isinstance(arg, ast.Dict):
            keys = [k for k in arg.keys if k is not None]
        elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id == "dict":
            keys = [ast.copy_location(ast.Constant(kw.arg), kw) for kw in arg.keywords if kw.arg]
        elif isinstance(arg, ast.DictComp):
            keys = _comprehension_keys(arg, ctx)
        elif isinstance(arg, (ast.List, ast.Tuple)):
            keys = [e.elts[0] for e in arg.elts if isinstance(e, ast.Tuple) and e.elts]
        for key in keys:
            why = _problem(key, taken)
            if why is not None:
                shown = repr(key.value) if isinstance(key, ast.Constant) else ctx.source(key)
                yield self.report(key, ctx, what=what, name=shown[:40], why=why,
                                  remedy=_remedy(why))
                return
