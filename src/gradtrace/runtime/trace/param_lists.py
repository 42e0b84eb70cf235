"""Where the list an optimizer was given was made: the line a missing model must be added to.

``self.params = list(a.parameters()) + list(b.parameters())`` then ``RMSprop(self.params)``:
a parameter left out of every optimizer is fixed on the first line, not on the constructor's.
Read in the file that ran (the static side of the run), never guessed from names.
"""
from __future__ import annotations

import ast

from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import function_at


def _lists_parameters(value: ast.expr) -> bool:
    """``value`` enumerates modules' parameters itself (a ``.parameters()`` call inside a
    list, a concatenation, ``itertools.chain``...), not a name passed along."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("parameters", "named_parameters") for n in ast.walk(value))


def listed_at(site: Site | None) -> Site | None:
    """For the optimizer constructor at ``site`` given a name (``Adam(params, lr=...)``,
    ``RMSprop(self.eval_parameters)``), the one assignment of that name that lists the
    parameters: in the constructor's function before it, or, for ``self.<attr>``, in the
    class's methods. None when the call is not found, takes its list inline, or the name is
    bound more than once there."""
    got = function_at(site)
    if got is None:
        return None
    tree, scope = got
    call = next((n for n in ast.walk(scope) if isinstance(n, ast.Call) and n.lineno == site.line
                 and (n.args or any(k.arg == "params" for k in n.keywords))), None)
    if call is None:
        return None
    arg = call.args[0] if call.args else next(k.value for k in call.keywords if k.arg == "params")
    if not isinstance(arg, (ast.Name, ast.Attribute)):
        return None
    spelled = ast.unparse(arg)
    where: ast.AST = scope
    if spelled.startswith("self.") and spelled.count(".") == 1:
        where = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                      and c.lineno <= site.line <= (c.end_lineno or c.lineno)), scope)
    found = [n for n in ast.walk(where) if isinstance(n, (ast.Assign, ast.AnnAssign))
             and n.value is not None and any(
                 ast.unparse(t) == spelled
                 for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
             and (where is not scope or n.lineno < site.line)]
    if len(found) != 1 or not _lists_parameters(found[0].value):  # type: ignore[arg-type]
        return None
    line = _remainder_group(found[0].value, scope, found[0].lineno)  # type: ignore[arg-type]
    return Site(site.path, line or found[0].lineno, site.function)


def _remainder_group(value: ast.expr, scope: ast.AST, before: int) -> int | None:
    """In a list of parameter groups written over several lines (``[{'params':
    m.base.parameters(), 'lr_mult': 0.1}, {'params': new_params}]``), the line of the one group
    whose ``'params'`` is a name bound once, before, to a filtered collection (``[p for p in
    m.parameters() if id(p) not in ids]``, ``filter(...)``): the group meant to take the rest,
    which the parameters missing from every group fell out of (HHL). None otherwise."""
    if not isinstance(value, (ast.List, ast.Tuple)) or value.lineno == value.end_lineno:
        return None
    filtered = {ast.unparse(t) for n in ast.walk(scope) if isinstance(n, ast.Assign)
                and n.lineno < before and _filtered(n.value) for t in n.targets}
    hits = [e.lineno for e in value.elts if isinstance(e, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value == "params" and isinstance(v, ast.Name)
        and v.id in filtered for k, v in zip(e.keys, e.values))]
    return hits[0] if len(hits) == 1 else None


def _filtered(value: ast.expr) -> bool:
    if isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
        return any(g.ifs for g in value.generators) and _lists_parameters(value)
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
        value.func.id == "filter" and _lists_parameters(value)


def _module_choice(value: ast.expr) -> bool:
    """``self.model``, ``model``, ``a if c else b`` of those: a module picked, not built."""
    if isinstance(value, ast.IfExp):
        return _module_choice(value.body) and _module_choice(value.orelse)
    return isinstance(value, (ast.Name, ast.Attribute))


def chosen_at(listed: Site | None) -> Site | None:
    """For the assignment at ``listed`` that lists parameters, when every ``.parameters()`` /
    ``.named_parameters()`` in it is called on one local name bound once, before, in the same
    function, to a module picked by name (``opt_model = self.model``, Hugging Face's
    ``create_optimizer``): that binding, the line that chose which module's parameters the
    optimizer gets. None otherwise."""
    got = function_at(listed)
    if got is None:
        return None
    tree, scope = got
    stmt = next((n for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AnnAssign))
                 and n.lineno == listed.line and n.value is not None), None)
    if stmt is None or scope is tree:
        return None
    receivers = {ast.unparse(n.func.value) if isinstance(n.func.value, ast.Name) else None
                 for n in ast.walk(stmt.value) if isinstance(n, ast.Call)  # type: ignore[arg-type]
                 and isinstance(n.func, ast.Attribute)
                 and n.func.attr in ("parameters", "named_parameters")}
    if len(receivers) != 1 or None in receivers:
        return None
    name = receivers.pop()
    bound = [n for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.For,
                                                          ast.With, ast.arg))
             and name in {ast.unparse(t) for t in _bound_names(n)}]
    if len(bound) != 1 or not isinstance(bound[0], ast.Assign) or \
            bound[0].lineno >= listed.line or not _module_choice(bound[0].value):
        return None
    return Site(listed.path, bound[0].lineno, listed.function)


def _bound_names(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, ast.AnnAssign):
        return [node.target]
    if isinstance(node, ast.For):
        return [node.target]
    if isinstance(node, ast.With):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return [ast.Name(id=node.arg)]  # a parameter of the function: not a local choice


# NOTE [optimizer over what a caller handed in]
# An optimizer built by a helper over what it was handed (`def get_optimizer(hp, models): params
# = get_parameters(models); return Adam(params, ...)`) lists whatever its caller chose: a
# parameter left out of it is fixed where the modules were chosen, the call
# `get_optimizer(self.hparams, self.models)`, not inside the helper nor at the line that binds
# the optimizer the loop steps. From the constructor's frame outward (the user frames noted when
# the optimizer was built), a frame whose list (or, above the constructor, whose call) is made
# from its own function's arguments hands the choice to the frame that called it; the first
# frame that chooses is named. Only when the constructor's list comes from the arguments of a
# plain function (else None: the list is made where it is built; a method building its own
# optimizer over a handed model, `Trainer.__init__(self, model)`, is where that is decided).
def handed_in(stack: list[tuple[object, object, int]]) -> Site | None:
    """The frame that chose the modules of an optimizer built by a helper over its arguments
    (NOTE [optimizer over what a caller handed in]), or None."""
    sites = [Site(code.co_filename, line, code.co_name)  # type: ignore[attr-defined]
             for _, code, line in stack]
    for i, site in enumerate(sites):
        if not _from_own_arguments(site, constructor=i == 0):
            return site if i else None
    return None


def _from_own_arguments(site: Site, constructor: bool) -> bool:
    got = function_at(site)
    if got is None or not isinstance(got[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    scope = got[1]
    names = [a.arg for a in scope.args.args + scope.args.kwonlyargs]
    if constructor and names[:1] in (["self"], ["cls"]):
        return False  # a method building its own optimizer (`__init__(self, model)`) chose
    own = set(names) - {"self", "cls"}
    call = next((n for n in ast.walk(scope) if isinstance(n, ast.Call) and n.lineno == site.line
                 and (n.args or n.keywords)), None)
    if call is None or not own:
        return False
    if constructor:
        exprs: list[ast.expr] = [call.args[0]] if call.args else [
            k.value for k in call.keywords if k.arg == "params"]
    else:
        exprs = list(call.args) + [k.value for k in call.keywords]
    read = {n.id for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)}
    bound = [n for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < site.line
             and any(isinstance(t, ast.Name) and t.id in read for t in n.targets)]
    read |= {n.id for b in bound for n in ast.walk(b.value) if isinstance(n, ast.Name)}
    return bool(read & own)
