"""GT557, GT562: a loop over a model's modules gathers one Parameter twice
(NOTE [parameter gathered twice]): through a property that hands out a child's parameter, or
through the recursive ``parameters()`` of a module that has children (the model comes first)."""
from __future__ import annotations

import ast
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.analysis.kinds import MODULE
from gradtrace.lint.analysis.modules import ClassInfo
from gradtrace.lint.analysis.project_files import imports_of, module_context
from gradtrace.lint.context import Context
from gradtrace.lint.nodes import walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.registration._module_tests import (
    NAME, Run, Subject, _append, _prop_target, child_layer, given_lists, has_param,
    module_loop_var, param_loop_lists, run)

MAX_FILES = 24
# packages never part of the checked project (skip the file lookup)
EXTERNAL = frozenset({"torch", "numpy", "os", "sys", "math", "typing", "collections", "copy",
                      "functools", "itertools", "logging", "warnings", "time", "random",
                      "argparse", "json", "re", "pathlib", "yaml", "tqdm", "torchvision"})
_TWO = ("and building the optimizer fails (ValueError: some parameters appear in more than one "
        "parameter group)")
_EITHER = ("twice: in one group torch warns of duplicate parameters and steps that tensor twice, "
           "in two building the optimizer fails")
_ONE = ("twice in that group: torch warns of duplicate parameters and the optimizer updates "
        "that tensor twice per step")


def _built(ctx: Context, name: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
               for n in walk(ctx.tree))


def _candidates(ctx: Context) -> Iterator[tuple[Context, ClassInfo]]:
    """The module classes of the file, then those of the files it imports and of theirs
    (NOTE [project index], two hops, at most ``MAX_FILES`` files): where a wrapper class the
    model is built from may live (a trainer importing the model file, which imports its
    blocks)."""
    for c in ctx.analysis.classes.values():
        if c.is_module:
            yield ctx, c
    seen, todo, hops = {ctx.path}, [ctx], 0
    while todo and hops < 2:
        hops += 1
        nxt = []
        for c in todo:
            for level, module, _ in set(imports_of(c).values()):
                if len(seen) > MAX_FILES or module.partition(".")[0] in EXTERNAL:
                    continue
                other = module_context(c, level, module)
                if other is None or other.path in seen:
                    continue
                seen.add(other.path)
                nxt.append(other)
                for k in other.analysis.classes.values():
                    if k.is_module:
                        yield other, k
        todo = nxt


def _split(a: Run, b: Run) -> ast.If | None:
    """The first test the two passes answer differently."""
    other = {id(s): r for s, r in b.tests}
    for s, r in a.tests:
        if id(s) in other and other[id(s)] != r:
            return s
    return None


def _model_class(model: str, node: ast.AST, ctx: Context) -> ClassInfo | None:
    """The module class of the file the loop's model is an instance of (its kind)."""
    if "." in model:
        return None
    k = ctx.analysis.kind(ast.Name(id=model), ctx.scope(), node.lineno)
    c = ctx.analysis.classes.get(k.cls) if k is not None and k.what == MODULE \
        and isinstance(k.cls, str) else None
    return c if c is not None and c.is_module else None


def _rebound_after(fn: ast.AST, name: str, line: int) -> bool:
    return any(isinstance(n, (ast.Assign, ast.AnnAssign)) and n.lineno > line and any(
        isinstance(t, ast.Name) and t.id == name
        for tg in (n.targets if isinstance(n, ast.Assign) else [n.target]) for t in walk(tg))
        for n in walk(fn))


class ParameterGatheredThroughProperty(Rule):
    """A loop over a model's modules appends `v.weight` to the parameter groups, and a module
    class of the file exposes its child's parameter as a property (`weight` returning
    `self.bn.weight`): the loop meets the parent and the child and gathers that one Parameter
    twice.

    Why: `model.modules()` yields the wrapper and its `self.bn`; `hasattr(v, "weight")` and
    `isinstance(v.weight, nn.Parameter)` are true for both, so the BatchNorm weight is appended
    once through the property and once from the BatchNorm itself. In two groups, building the
    optimizer raises `ValueError: some parameters appear in more than one parameter group`
    (DiverseBranchBlock#25, its `BNAndPadLayer` in a YOLO trainer; checked on torch 2.13); in
    one group, torch warns of duplicates. Test the wrapper's class before the attribute test,
    or gather with `v.named_parameters(recurse=False)`.
    Known limits: the property must return `self.<child>.<name>` of a torch layer its class
    builds in `__init__`; the class must be built in its file, which is this file or one it
    imports (two hops); the lists must reach an optimizer (in the function, or through the
    function's return to a caller of the file).
    """

    code = "GT557"
    name = "parameter-gathered-through-property"
    message = ("this loop over `{model}.modules()` meets `{cls}` and its child `{sub}`: "
               "`{cls}.{attr}` is a property returning `self.{sub}.{attr2}`, so that one "
               "Parameter is appended to `{first}` (for `{cls}`) and to `{second}` (for the "
               "`{layer}`), {effect}")
    triggers = ("modules(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            class PadBN(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.bn = nn.BatchNorm2d(c)
                def forward(self, x):
                    return self.bn(x)
                @property
                def weight(self):
                    return self.bn.weight
            model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), PadBN(4))
            decay, norm = [], []
            for v in model.modules():
                if isinstance(v, nn.BatchNorm2d):
                    norm.append(v.weight)
                elif hasattr(v, "weight") and isinstance(v.weight, nn.Parameter):
                    decay.append(v.weight)
            opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                   {"params": norm}], lr=0.1)
            """, at=(15, 4)),
        Good("""
            import torch
            from torch import nn
            class PadBN(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.bn = nn.BatchNorm2d(c)
                def forward(self, x):
                    return self.bn(x)
                @property
                def weight(self):
                    return self.bn.weight
            model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), PadBN(4))
            decay, norm = [], []
            for v in model.modules():
                if isinstance(v, (nn.BatchNorm2d, PadBN)):
                    if isinstance(v, nn.BatchNorm2d):
                        norm.append(v.weight)
                elif hasattr(v, "weight") and isinstance(v.weight, nn.Parameter):
                    decay.append(v.weight)
            opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4},
                                   {"params": norm}], lr=0.1)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        mv = module_loop_var(node, ctx)
        if mv is None:
            return
        model, var = mv
        attrs = {a for s in walk(node) if isinstance(s, ast.Expr)
                 for lst_attr in [_append(s, var)] if lst_attr and lst_attr[1]
                 for a in [lst_attr[1]]}
        if not attrs:
            return
        found = []
        for home, cls in _candidates(ctx):
            for attr in sorted(attrs):
                target = _prop_target(cls, attr)
                if target is None:
                    continue
                child = child_layer(cls, target[0], home)
                if child is None or has_param(child, target[1], ctx) is not True \
                        or not _built(home, cls.name):
                    continue
                subject = Subject(cls=cls, home=home if home is not ctx else None)
                mine, theirs = run(node.body, var, subject, ctx), \
                    run(node.body, var, child, ctx)
                if mine is None or theirs is None:
                    continue
                first = [a for a in mine.appends if a[1] == attr]
                second = [a for a in theirs.appends if a[1] == target[1]]
                if not first or not second:
                    continue
                lists = {first[0][0], second[0][0]}
                if given_lists(ctx.scope().node, lists, ctx) != lists:
                    continue
                at = (_split(mine, theirs) if len(lists) == 2 else None) or first[0][2]
                found.append((len(lists) == 1, at.lineno, at, cls, attr, target, child,
                              first[0], second[0]))
        if not found:
            return
        _, _, at, cls, attr, (sub, attr2), child, first, second = min(
            found, key=lambda f: (f[0], f[1]))
        yield self.report(
            at, ctx, related=[Related(ctx.path, first[2].lineno,
                                      f"`{cls.name}.{attr}` appended here", ctx.column(first[2])),
                              Related(ctx.path, second[2].lineno,
                                      f"its `{sub}.{attr2}` appended here",
                                      ctx.column(second[2]))],
            model=model, cls=cls.name, sub=sub, attr=attr, attr2=attr2, first=first[0],
            second=second[0], layer=(child.torch or "").rpartition(".")[2],
            effect=_ONE if first[0] == second[0] else _TWO)


class ModuleParametersGatheredTwice(Rule):
    """A loop over a model's modules extends a parameter list with `v.parameters()` for a
    module its tests do not keep out, and the model itself is such a module: `modules()`
    yields the model first, and its `parameters()` holds every parameter, which the loop then
    gathers again from the layers.

    Why: `parameters()` is recursive, so for the model (and every container) it returns the
    children's tensors too. A filter that keeps the model out by its class's spelling
    (`'model' in str(layer.__class__)`, true only when the class lives in a file called
    `model.py`) lets it through elsewhere (InsightFace_Pytorch#169, the same code in a
    notebook); the optimizer then raises `ValueError: some parameters appear in more than one
    parameter group`, or warns of duplicates in one group (checked on torch 2.13). Keep the
    model and containers out by structure (`if list(layer.children()): continue`) or use
    `layer.parameters(recurse=False)`.
    Known limits: the tests must be read (`isinstance`, `hasattr`, class-name tests); the list
    must reach an optimizer in the function or through its return to a caller of the file. A
    nested loop over the module's `named_parameters()` (or `parameters()`) with no arguments
    that appends each tensor gathers the same way (`recurse=False` is the module's own).
    """

    code = "GT562"
    name = "module-parameters-gathered-twice"
    message = ("`{model}.modules()` yields `{model}` itself first, and nothing here keeps it "
               "out{by_name}: `{call}` then holds every parameter of the model, which the loop "
               "gathers again from its layers ({effect})")
    triggers = ("modules(",)
    examples = [
        Bad("""
            import torch
            from torch import nn
            model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
            bn, rest = [], []
            for layer in model.modules():
                if 'Sequential' in str(layer.__class__):
                    continue
                if isinstance(layer, nn.BatchNorm2d):
                    bn.extend(layer.parameters())
                else:
                    rest.extend(layer.parameters())
            opt = torch.optim.SGD([{"params": rest, "weight_decay": 5e-4}, {"params": bn}], lr=0.1)
            """, at=(6, 4)),
        Good("""
            import torch
            from torch import nn
            model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
            bn, rest = [], []
            for layer in model.modules():
                if list(layer.children()):
                    continue
                if isinstance(layer, nn.BatchNorm2d):
                    bn.extend(layer.parameters())
                else:
                    rest.extend(layer.parameters())
            opt = torch.optim.SGD([{"params": rest, "weight_decay": 5e-4}, {"params": bn}], lr=0.1)
            """),
    ]

    def visit_For(self, node: ast.For, ctx: Context) -> Iterator[Finding]:
        mv = module_loop_var(node, ctx)
        if mv is None:
            return
        model, var = mv
        root = run(node.body, var, Subject(cls=_model_class(model, node, ctx), root=True), ctx)
        if root is None:
            return
        whole = [a for a in root.appends if a[1] is None]
        if not whole:
            return
        lst, _, stmt = whole[0]
        collects = [s for s in walk(node) if isinstance(s, ast.stmt) and _append(s, var)]
        if len(collects) < 2 and root.tests:
            return
        fn = ctx.scope().node
        if lst not in given_lists(fn, {lst}, ctx) or _rebound_after(fn, lst, node.lineno):
            return
        named = [s for s, r in root.tests if r == NAME]
        at = named[0] if named else stmt
        mine = param_loop_lists(stmt, var) or [lst]  # a nested loop may split by name
        theirs = {a for s in collects if s is not stmt for a in [
            *(_append(s, var) or ("",))[:1], *param_loop_lists(s, var)] if a}
        group = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
            and isinstance(stmt.value.args[0], ast.Dict)  # one group per module
        effect = (_TWO.replace("and building", "building")
                  if group or any(t != m for t in theirs for m in mine)
                  else _ONE.replace("twice in that group", "twice in one group")
                  if len(mine) == 1 else _EITHER)
        yield self.report(at, ctx, related=[Related(
            ctx.path, stmt.lineno, "the recursive `parameters()` gathered here",
            ctx.column(stmt))], model=model, call=ctx.source(stmt.iter) if isinstance(
                stmt, ast.For) else f"{var}.parameters()",
            by_name=" (this test reads the class's name, not what the module holds)"
            if named else "", effect=effect)
