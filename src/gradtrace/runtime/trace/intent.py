"""What the code says it means, read at report time: a module left out of the optimizer on
purpose. ``set(model.parameters()).difference(model.encoder.parameters())``,
``[p for p in model.parameters() if p not in set(model.encoder.parameters())]`` or
``set(all) - set(model.encoder.parameters())`` freeze ``encoder`` by omission: its parameters
still get gradients, but no optimizer is meant to hold them (GT821 stays silent for them).

# NOTE [left out by name]
A comprehension over ``X.named_parameters()`` whose condition tests the name for inequality
with a constant (``n != 'base_kernel.raw_lengthscale'``, ``n not in {'shift', 'gain'}``, the
set written inline or bound to a name in the file) leaves out the parameters of exactly those
names, on purpose: GPyTorch fixes a lengthscale that way. A substring test (``'bias' not in
n``, ``not any(nd in n for nd in no_decay)``) names a class of parameters, the first half of a
weight-decay split whose other group may be forgotten: it counts for nothing here.

# NOTE [removed to be grouped]
``ids = set(map(id, m.base.parameters())) | set(map(id, m.feat.parameters()))`` then
``new = [p for p in m.parameters() if id(p) not in ids]`` and the groups
``[{'params': m.base.parameters(), 'lr_mult': 0.1}, {'params': new}]``: the removal splits the
parameters into groups, it freezes nothing. When one module of a removed collection is also
given to an optimizer by its own ``.parameters()`` elsewhere in the file, the collection counts
for nothing here: its other modules were forgotten, not left out (HHL's ``feat``, ``feat_bn``
and ``triplet``)."""
from __future__ import annotations

import ast
from typing import Any


def _parameters_of(node: ast.AST) -> set[str]:
    """Last attribute names of ``X.parameters()`` / ``X.named_parameters()`` calls in ``node``."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("parameters", "named_parameters") and \
                isinstance(n.func.value, ast.Attribute):
            out.add(n.func.value.attr)
    return out


def _assigned(tree: ast.AST) -> dict[str, list[ast.AST]]:
    """Name -> the values the file assigns to it."""
    values: dict[str, list[ast.AST]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    values.setdefault(t.id, []).append(n.value)
    return values


def excluded_modules(tree: ast.AST) -> set[str]:
    """Attribute names of modules whose parameters the file removes from a collection (the
    removed collection written inline or through a name assigned in the file)."""
    values = _assigned(tree)
    removed: list[ast.AST] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr == "difference":
            removed.extend(n.args)
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
            removed.append(n.right)
        elif isinstance(n, ast.Compare) and any(isinstance(o, ast.NotIn) for o in n.ops):
            removed.extend(n.comparators)
    collections = [[r, *(values.get(r.id, []) if isinstance(r, ast.Name) else [])]
                   for r in removed]
    inside = {id(n) for parts in collections for part in parts for n in ast.walk(part)}
    listed = {n.func.value.attr for n in ast.walk(tree) if id(n) not in inside and isinstance(
        n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "parameters"
        and isinstance(n.func.value, ast.Attribute)}
    out: set[str] = set()
    for parts in collections:
        mods = set().union(*(_parameters_of(part) for part in parts))
        if not mods & listed:  # NOTE [removed to be grouped]
            out |= mods
    return out


def _strings(node: ast.AST | None, values: dict[str, list[ast.AST]]) -> set[str]:
    """The string constants of ``node``: one, or a tuple/list/set of them (through a name)."""
    parts = [node, *(values.get(node.id, []) if isinstance(node, ast.Name) else [])]
    out = set()
    for part in parts:
        elts = part.elts if isinstance(part, (ast.Tuple, ast.List, ast.Set)) else [part]
        out |= {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return out


def excluded_names(tree: ast.AST) -> set[str]:
    """Parameter names a comprehension over ``named_parameters()`` leaves out by an exact
    inequality on the name (NOTE [left out by name])."""
    values = _assigned(tree)
    out: set[str] = set()
    for n in ast.walk(tree):
        if not isinstance(n, ast.comprehension) or not isinstance(n.iter, ast.Call) or \
                not isinstance(n.iter.func, ast.Attribute) or \
                n.iter.func.attr != "named_parameters" or not isinstance(n.target, ast.Tuple) \
                or not n.target.elts or not isinstance(n.target.elts[0], ast.Name):
            continue
        key = n.target.elts[0].id
        for cond in n.ifs:
            if not isinstance(cond, ast.Compare) or len(cond.ops) != 1:
                continue
            left, op, right = cond.left, cond.ops[0], cond.comparators[0]
            if isinstance(op, ast.NotEq):
                if isinstance(left, ast.Name) and left.id == key:
                    out |= _strings(right, values)
                elif isinstance(right, ast.Name) and right.id == key:
                    out |= _strings(left, values)
            elif isinstance(op, ast.NotIn) and isinstance(left, ast.Name) and left.id == key:
                out |= _strings(right, values)
    return out


def _files(data: Any) -> list[ast.AST]:
    from gradtrace.runtime.trace.locate import tree_of

    trees = []
    for path in {r.site.path for r in list(data.optimizers.values()) if r.site is not None}:
        tree = tree_of(path)
        if tree is not None:
            trees.append(tree)
    return trees


def left_out_on_purpose(data: Any, names: list[str]) -> bool:
    """Whether every parameter name (``Model.encoder.0.weight``) lies under a module the files
    of the optimizers' steps exclude from the optimizer's parameters, or is one of the names
    they leave out by name (see the module doc)."""
    excluded: set[str] = set()
    by_name: set[str] = set()
    for tree in _files(data):
        excluded |= excluded_modules(tree)
        by_name |= excluded_names(tree)
    return bool(excluded | by_name) and all(
        set(n.split(".")[1:-1]) & excluded or
        any(n.endswith("." + k) for k in by_name) for n in names)


def climbed_module(site: Any) -> bool:
    """The module's call at ``site`` gives the loss a value it climbs (a critic, a
    discriminator): left out of the trained module's optimizer on purpose
    (NOTE [maximized module output] in gradtrace.lint.analysis.maximized)."""
    if site is None or site.path.startswith("<"):
        return False
    from gradtrace.lint.analysis.maximized import maximized_at
    from gradtrace.runtime.trace.locate import tree_of

    tree = tree_of(site.path)
    return tree is not None and maximized_at(tree, site.line, site.column)
