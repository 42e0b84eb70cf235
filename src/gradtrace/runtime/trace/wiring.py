"""How the model was wired, seen on the live objects at the end of a run: a ``requires_grad``
flag set as a plain attribute on a module, a model re-created or a layer replaced after the
optimizer was built. The live objects decide; :mod:`gradtrace.runtime.trace.locate` only finds the
line in the source.
"""
from __future__ import annotations

import ast
import inspect
from typing import Any, Iterable

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.build import code_for, make
from gradtrace.runtime.frames import Site
from gradtrace.runtime.trace.locate import enclosing_function, function_at, tree_of
from gradtrace.runtime.trace.param_lists import chosen_at, handed_in, listed_at


def _files(data: Any) -> list[str]:
    """The user files where the modules that ran were called or defined."""
    from gradtrace.runtime.fuse import is_user_file

    out: dict[str, None] = {}
    for rec in list(data.modules.values()):
        if rec.site is not None:
            out.setdefault(rec.site.path)
        m = rec.ref()
        if m is not None:
            out.setdefault(_class_file(type(m)))
    return [p for p in out if p and is_user_file(p)]


def _class_file(cls: type) -> str:
    """The file defining ``cls``: read from its functions' code, which stays right when the
    class's module is gone from ``sys.modules`` (a script run as ``__main__`` that returned)."""
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is not None:
            return code.co_filename
    try:
        return inspect.getsourcefile(cls) or ""
    except (TypeError, OSError):
        return ""


def _assignments(paths: Iterable[str], attr: str) -> list[tuple[str, ast.Assign]]:
    out = []
    for path in paths:
        tree = tree_of(path)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
                out.append((path, node))
    return out


def requires_grad_attribute(data: Any) -> list[Finding]:
    """Modules that ran carrying a plain ``requires_grad`` attribute (``module.requires_grad =
    False``) that their parameters do not follow: it froze (or unfroze) nothing."""
    out: list[Finding] = []
    seen: set[int] = set()
    assigns: list[tuple[str, ast.Assign]] | None = None
    for rec in list(data.modules.values()):
        root = rec.ref()
        if root is None:
            continue
        for name, sub in root.named_modules():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            flag = sub.__dict__.get("requires_grad")
            params = list(sub.parameters()) if isinstance(flag, bool) else []
            wrong = [p for p in params if p.requires_grad != flag]
            if not wrong or len(wrong) < len(params):  # the flag is followed in part: a
                continue                               # class's own setting, not a mistake
            if assigns is None:
                assigns = _assignments(_files(data), "requires_grad")
            site = _flag_site(assigns, name.rsplit(".", 1)[-1], flag)
            verb = "keep training" if flag is False else "stay frozen"
            label = f"{type(root).__name__}.{name}" if name else type(root).__name__
            out.append(make(code_for("requires-grad-attribute", "GT820"), site,
                            f"`requires_grad = {flag}` on the module {label} only set a Python "
                            f"attribute: its {len(wrong)} parameter tensor(s) still have "
                            f"requires_grad={not flag} and {verb}",
                            fix=f"call .requires_grad_({flag}) on the module (or set it on each "
                                "parameter)", severity="warning"))
    return out


def _flag_site(assigns: list[tuple[str, ast.Assign]], child: str, flag: bool) -> Site | None:
    """The ``<...>.<child>.requires_grad = flag`` line (any such line for the root module)."""
    fallback = None
    for path, node in assigns:
        if not (isinstance(node.value, ast.Constant) and node.value.value is flag):
            continue
        for t in node.targets:
            if not isinstance(t, ast.Attribute):
                continue
            owner = t.value
            last = owner.attr if isinstance(owner, ast.Attribute) else \
                owner.id if isinstance(owner, ast.Name) else ""
            if child and last == child:
                return Site(path, node.lineno)
            if fallback is None and (not child or isinstance(owner, ast.Name)):
                fallback = Site(path, node.lineno)
    return fallback


def replaced_at(data: Any, module: torch.nn.Module, called_at: Site | None) -> Site | None:
    """Where ``module`` (a module the optimizer does not hold, while it holds stale parameters)
    was put in place after the optimizer was built: ``parent.<name> = ...`` outside
    ``__init__``, or the later of two assignments of the name the model is called by."""
    for rec in list(data.modules.values()):
        parent = rec.ref()
        for name, child in parent.named_children() if parent is not None else ():
            if child is module:
                site = _attribute_rebound(_files(data), name)
                if site is not None:
                    return site
    return _name_rebound(called_at)


def _attribute_rebound(paths: list[str], name: str) -> Site | None:
    for path, node in _assignments(paths, name):
        if not isinstance(node.value, ast.Call):
            continue
        t = next(t for t in node.targets if isinstance(t, ast.Attribute) and t.attr == name)
        inside_init = isinstance(t.value, ast.Name) and t.value.id == "self"
        if not inside_init:
            return Site(path, node.lineno)
    return None


def _name_rebound(called_at: Site | None) -> Site | None:
    """``model = build(); opt = SGD(model.parameters()); model = build()``: the last line."""
    if called_at is None:
        return None
    tree = tree_of(called_at.path)
    if tree is None:
        return None
    names = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Name) and n.lineno == called_at.line]
    for name in names:
        binds = sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign)
                       and n.lineno < called_at.line and any(
                           isinstance(t, ast.Name) and t.id == name for t in n.targets))
        uses = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and n.attr == "parameters" and isinstance(n.value, ast.Name)
                and n.value.id == name]
        if len(binds) >= 2 and any(binds[0] < u < binds[-1] for u in uses):
            return Site(called_at.path, binds[-1], called_at.function)
    return None


def built_at(step: Site | None) -> Site | None:
    """Where the optimizer stepped at ``step`` (``<x>.step()``) was built: the last assignment
    of ``<x>`` before that line in the same function (a name or ``self.<attr>``)."""
    got = function_at(step)
    if got is None:
        return None
    tree, scope = got
    # `opt.step()`; for `scaler.step(opt)` (a GradScaler, an accelerator) the argument
    receiver = next((ast.unparse(n.args[0] if n.args else n.func.value) for n in ast.walk(scope)
                     if isinstance(n, ast.Call) and n.lineno == step.line
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "step"), None)
    if receiver is None:
        return None
    best = None
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno < step.line:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(ast.unparse(t) == receiver for t in targets) and (best is None or node.lineno > best):
                best = node.lineno
    if best is None and receiver.startswith("self."):  # built in another method (__init__):
        lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assign)  # the one
                 and any(ast.unparse(t) == receiver for t in n.targets)]  # assignment
        return Site(step.path, lines[0]) if len(lines) == 1 else None
    return None if best is None else Site(step.path, best, step.function)


def groups_listed_at(data: Any, opt: Any) -> Site | None:
    """Where the parameter groups of ``opt`` are spelled out, when each group holds exactly the
    parameters of one submodule (``[{"params": self.encoder.parameters()}, ...]``): the line
    of the first group's ``<...>.<name>.parameters()``, if the files that ran have one."""
    names = []
    for group in opt.param_groups:
        ids = {id(p) for p in group["params"]}
        name = _module_named(data, ids)
        if not name:
            return None
        names.append(name)
    if not names:
        return None
    hits = [(path, n.lineno) for path in _files(data) for n in _walk(path)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == "parameters" and isinstance(n.func.value, ast.Attribute)
            and n.func.value.attr == names[0]]
    return Site(*hits[0]) if len(hits) == 1 else None


def _walk(path: str) -> Iterable[ast.AST]:
    tree = tree_of(path)
    return ast.walk(tree) if tree is not None else ()


def _module_named(data: Any, ids: set[int]) -> str:
    """The attribute name of a submodule (of a module that ran) whose parameters are ``ids``."""
    for rec in list(data.modules.values()):
        root = rec.ref()
        for name, sub in root.named_modules() if root is not None else ():
            if name and {id(p) for p in sub.parameters()} == ids:
                return name.rsplit(".", 1)[-1]
    return ""


def tensor_made_at(cls: type, attr: str) -> Site | None:
    """The ``self.<attr> = <a value>`` line of ``cls`` (any method; ``__init__`` first) that
    puts a value there, not the ``self.<attr> = None`` placeholder: where a plain tensor
    attribute is made (a lazily built weight in ``init_hidden``)."""
    path = _class_file(cls)
    tree = tree_of(path) if path else None
    if tree is None:
        return None
    best: tuple[int, int] | None = None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls.__name__):
            continue
        for fn in node.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and not (isinstance(n.value, ast.Constant)
                                                      and n.value.value is None) and any(
                        isinstance(t, ast.Attribute) and t.attr == attr and
                        isinstance(t.value, ast.Name) and t.value.id == "self"
                        for t in n.targets):
                    rank = (fn.name != "__init__", n.lineno)
                    if best is None or rank < best:
                        best = rank
    return None if best is None else Site(path, best[1])


def class_line(cls: type) -> Site | None:
    """The ``class <Name>`` line of ``cls`` in the file that defines it."""
    path = _class_file(cls)
    tree = tree_of(path) if path else None
    lines = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
             and n.name == cls.__name__] if tree is not None else []
    return Site(path, lines[0]) if len(lines) == 1 else None


def plain_object_parameters(data: Any, in_opt: set[int],
                            groups: dict[tuple[str, Site | None, str, str], list[str]]) -> None:
    """nn.Parameters held by a plain object (a layer class that is not an nn.Module) kept as
    an attribute of a module that ran: they get gradients, but parameters() never lists them."""
    from gradtrace.runtime.fuse import is_user_file

    for rec in list(data.modules.values()):
        m = rec.ref()
        if m is None or rec.grad_runs == 0:
            continue
        for attr, value in vars(m).items():
            cls = type(value)
            if isinstance(value, (torch.nn.Module, torch.Tensor)) or not hasattr(value, "__dict__"):
                continue
            hits = [k for k, v in vars(value).items() if isinstance(v, torch.nn.Parameter)
                    and v.requires_grad and v.grad is not None and id(v) not in in_opt]
            # (the file test reads sysconfig: only for an object that holds such Parameters)
            if hits and is_user_file(_class_file(cls)):
                key = ("unregistered-submodule", class_line(cls) or rec.site,
                       f"they are held by `{type(m).__name__}.{attr}`, a `{cls.__name__}`: "
                       "a plain class, not an nn.Module, so model.parameters() does not list "
                       "its Parameters", f"make `{cls.__name__}` a subclass of nn.Module "
                       "(calling super().__init__()) so its Parameters are registered")
                groups.setdefault(key, []).extend(f"{type(m).__name__}.{attr}.{k}" for k in hits)


def partial_optimizer_site(data: Any, module: torch.nn.Module) -> Site | None:
    """Where the optimizer was built that takes part of ``module``'s parent but not
    ``module`` (``Adam(self.shared.encoder.parameters())`` while the loss also runs
    ``shared.decoder``), when several optimizers stepped: the nearest ancestor of ``module``
    whose parameters some optimizer holds, held by exactly one optimizer, and that optimizer's
    constructor call naming the part it took (read in the files that ran). None otherwise."""
    path = _path_of(data, module)
    if not path:
        return None
    root, names = path
    steppers = [r.ref() for r in list(data.optimizers.values()) if r.steps and r.ref()]
    held = [{id(p) for g in o.param_groups for p in g["params"]} for o in steppers]
    for cut in range(len(names) - 1, -1, -1):  # up to the outermost module that ran
        parent = root.get_submodule(".".join(names[:cut]))
        mine = {id(p) for p in parent.parameters()}
        owners = [i for i, h in enumerate(held) if h & mine]
        if not owners:
            continue
        if len(owners) != 1:
            return None
        taken = [n for n, child in parent.named_children()
                 if {id(p) for p in child.parameters()} & held[owners[0]]]
        spelled = [".".join(names[:cut] + [n]) for n in taken]
        return _constructor_naming(data, type(steppers[owners[0]]).__name__, spelled)
    return None


def _path_of(data: Any, module: torch.nn.Module) -> tuple[torch.nn.Module, list[str]] | None:
    """(the outermost module that ran holding ``module``, the attribute path to it)."""
    best: tuple[torch.nn.Module, list[str]] | None = None
    for rec in list(data.modules.values()):
        root = rec.ref()
        if root is None:
            continue
        for name, sub in root.named_modules():
            if sub is module and name and (best is None or name.count(".") + 1 > len(best[1])):
                best = (root, name.split("."))
    return best


def _constructor_naming(data: Any, cls_name: str, parts: list[str]) -> Site | None:
    """The one ``<cls_name>(<...>.<part>.parameters(), ...)`` call of the files that ran."""
    found: list[Site] = []
    for path in _files(data):
        for node in _walk(path):
            if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(
                    node.func, "id", None)) == cls_name and node.args and any(
                    isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("parameters", "named_parameters") and any(
                        ("." + ast.unparse(n.func.value)).endswith("." + p) for p in parts)
                    for n in ast.walk(node.args[0])):
                found.append(Site(path, node.lineno, "", node.col_offset))
    return found[0] if len(found) == 1 else None


def single_optimizer_built_at(data: Any) -> Site | None:
    """Where the one optimizer that stepped was built (the list it was given leaves the
    parameters out); None when several optimizers stepped (which one should hold them?)."""
    steppers = [r for r in list(data.optimizers.values()) if r.steps and r.ref() is not None]
    if len(steppers) != 1:
        return None
    opt = steppers[0].ref()
    site = groups_listed_at(data, opt)
    if site is None:
        site = built_at(steppers[0].site) or _constructed_at(data, opt)
        listed = listed_at(site)  # `Adam(params)`: where `params` was listed
        if listed is None:  # `opt = self.create_optimizer()`: the list in the factory, only
            made = chosen_at(listed_at(_constructed_at(data, opt)))  # when a module was
            return made or _handed_in(data, opt) or site  # picked there (`opt_model =
            # self.model`); NOTE [optimizer over what a caller handed in]
        site = chosen_at(listed) or listed
    return site


def optimizer_built_at(data: Any, rec: Any, opt: Any) -> Site | None:
    """The line that built ``opt`` (its record ``rec``): the constructor call on the stack
    noted then, else the last assignment of the stepped name before its ``step()``."""
    return _constructed_at(data, opt) or built_at(rec.site)


def _handed_in(data: Any, opt: Any) -> Site | None:
    ev = data.opt_built.get(id(opt))
    if ev is None or ev.ref() is not opt or not ev.stack:
        return None
    return handed_in(ev.stack)


def _constructed_at(data: Any, opt: Any) -> Site | None:
    """The user line of the optimizer's constructor call, from the stack noted when it was
    built (an optimizer built in another function than the one stepping it: a policy's
    ``__init__``, ``configure_optimizers``)."""
    ev = data.opt_built.get(id(opt))
    if ev is None or ev.ref() is not opt or not ev.stack:
        return None
    _, code, line = ev.stack[0]
    return Site(code.co_filename, line, code.co_name)


def other_instance_at(data: Any, module: torch.nn.Module,
                      stale: list[Any]) -> tuple[Site, str, str] | None:
    """The optimizer holding ``stale`` parameters was built over another instance of the
    model that trains: ``model = Net(); opt = SGD(net.parameters())`` (the trained model of
    class ``Net`` is bound to another name, by a ``Net(...)`` call before the optimizer's line,
    in the same function). That optimizer's line, why and the fix, else None (then the model
    may have been re-created after it: :func:`replaced_at`)."""
    held = {id(p) for p in stale[:64]}
    opt = next((r for r in list(data.optimizers.values()) if r.ref() is not None and any(
        id(p) in held for g in r.ref().param_groups for p in g["params"])), None)
    at = built_at(opt.site) if opt is not None else None
    tree = tree_of(at.path) if at is not None else None
    if tree is None:
        return None
    ran = [r.ref() for r in list(data.modules.values()) if r.grad_runs and r.ref() is not None]
    tops = {type(m).__name__ for m in ran if any(q is module for q in m.modules())
            and not any(m is not o and any(c is m for c in o.modules()) for o in ran)}
    stmts = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)]
    line = next((n for n in stmts if n.lineno == at.line), None)
    receivers = {ast.unparse(n.value) for n in ast.walk(line) if isinstance(n, ast.Attribute)
                 and n.attr in ("parameters", "named_parameters")} if line is not None else set()
    scope = enclosing_function(tree, at.line)
    for n in stmts:
        if receivers and n.lineno < at.line and enclosing_function(tree, n.lineno) is scope \
                and isinstance(n.value, ast.Call) and _last(n.value.func) in tops \
                and any(isinstance(t, (ast.Name, ast.Attribute))
                        and ast.unparse(t) not in receivers for t in n.targets):
            names = ", ".join(sorted(receivers))
            return (at, f"the optimizer built here holds the parameters of `{names}` "
                    f"({len(stale)} of them, never used), another `{_last(n.value.func)}` "
                    "than the one that trains", "build the optimizer over the parameters of "
                    "the model the loop trains")
    return None


def _last(f: ast.AST) -> str:
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")


