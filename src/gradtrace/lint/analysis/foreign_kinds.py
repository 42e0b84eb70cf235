"""What a call of another file of the project builds: a module of a known class.

# NOTE [foreign module kinds]
``model = Net(cfg)`` with ``Net`` an ``nn.Module`` class of another file of the project, and
``model = build_model(args)`` / ``net = models.get_model(cfg)`` with a factory function of
another file whose every ``return`` is a module of one class (read by that file's own
:meth:`~.facts.Analysis.returns`, so a factory that calls a further factory or class of its
own file or project is followed the same way, up to the project index's depth): the result is
a module (:data:`~.kinds.MODULE`). Its attributes (``model.model.requires_grad = False``)
are read from the ``__init__`` of the class built, through the factory too (unseen54a's recall
run: a factory's model was known as a module, its submodules not). Its ``cls`` is spelt in this file's terms (the qualified
name of the imported class, or the factory's module path and the class name) so that no class
of this file is taken for it; a torch class keeps its own name (``torch.nn.Linear``). Only
modules are carried across files: an optimizer's owners or a tensor's origin are spelt in the
other file's names. Unknown (the class is no module, returns disagree, a name cannot be
resolved): None, as before (NOTE [project index]). Read in the code of a script, a
function and the methods of a class that is no module (a trainer or runner: ``self.model =
get_model(args)``, ``model = Net(cfg)`` in any method); in a module class only as the whole
value of a ``self.<x> = ...`` of its ``__init__`` (``self.backbone = build_backbone(cfg)``,
read when a rule asks about ``self.backbone``): a model file's methods call imported classes
everywhere, and a rule asking about each call would make the file parse what it imports. A
method of an imported class (``AutoModel.from_config(...)``) is no definition of another
file: the index answers None before parsing the class's file (its ``foreign_def``). The
project index registers its
look-up in :data:`DEFINITIONS` when it is imported (every rule set imports it): the kinds
layer is below the index, which makes contexts, so it cannot import it.
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Callable

from gradtrace.lint.analysis.kinds import MODULE, Kind

if TYPE_CHECKING:
    from gradtrace.lint.context import Context
    from gradtrace.lint.analysis.modules import ClassInfo
    from gradtrace.lint.flow import Scope

# the project index's ``foreign_def`` (the definition of another file a call names), set by
# :mod:`.project` when imported; empty: no file is read, no foreign kind is known
DEFINITIONS: list[Callable[[Context, ast.expr], tuple[Context, ast.AST] | None]] = []


def foreign_asked(cls: ClassInfo | None, call: ast.Call) -> bool:
    """Whether ``call``, read in a method of ``cls`` (None: a script's or a function's code),
    may be looked up in another file (NOTE [foreign module kinds]): outside classes, in the
    methods of a class that is no module (a trainer, a runner), and in a module class only as
    the whole value of a ``self.<x> = ...`` of its ``__init__``."""
    if cls is None or not cls.is_module:
        return True
    return any(i.value is call for i in cls.init_attrs.values())


def foreign_module_kind(ctx: Context, call: ast.Call, scope: Scope, line: int
                        ) -> Kind | None:
    """The module kind of ``call`` when it builds one through a class or a factory function
    of another file of the project (NOTE [foreign module kinds]); None otherwise."""
    root = call.func
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name) or root.id == "self":
        return None
    b = scope.binding_before(root.id, line)
    if b is not None and not isinstance(b.stmt, (ast.Import, ast.ImportFrom)):
        return None  # a local name: not the import
    got = DEFINITIONS[0](ctx, call.func) if DEFINITIONS else None
    if got is None:
        return None
    octx, node = got
    q = ctx.qualified_name(call.func) or ""
    if isinstance(node, ast.ClassDef):
        cls = octx.analysis.classes.get(node.name)
        if cls is None or cls.node is not node or not cls.is_module:
            return None
        return Kind(MODULE, cls=q or None, node=call)
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    k = octx.analysis.returns(node)
    if k is None or k.what != MODULE:
        return None
    name = k.cls
    if name is not None and "." not in name:  # a class of the factory's file
        prefix = q.rpartition(".")[0]
        name = prefix + "." + name if prefix else None
    return Kind(MODULE, cls=name, node=call)


def foreign_attr_kind(ctx: Context, call: ast.AST | None, attr: str) -> Kind | None:
    """``model.conv1`` with ``model = Net(...)`` built from a module class of another file of
    the project whose ``__init__`` makes ``self.conv1`` a module there: a module (its class
    kept only when it is torch's; NOTE [foreign module kinds]). Also with
    ``model = build_model()``, a factory of another file whose every ``return`` builds one
    module class (of its file, or further through the index). None otherwise."""
    cls = _built_class(ctx, call, 0)
    if cls is None:
        return None
    k = cls.attr_kind(attr)
    if k is None or k.what != MODULE:
        return None
    return Kind(MODULE, cls=k.cls if (k.cls or "").startswith("torch.") else None)


def _built_class(ctx: Context, call: ast.AST | None, depth: int) -> ClassInfo | None:
    """The module class of another file that ``call`` builds, directly or through factories
    (``build_model()`` -> ``return EnergyWideResNet()``), up to three files deep."""
    if not isinstance(call, ast.Call) or not DEFINITIONS or depth > 2:
        return None
    got = DEFINITIONS[0](ctx, call.func)
    if got is None:
        return None
    octx, node = got
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        k = octx.analysis.returns(node)
        if k is None or k.what != MODULE or not isinstance(k.node, ast.Call):
            return None
        local = octx.analysis.classes.get(k.cls or "")
        if local is not None and isinstance(k.node.func, ast.Name) \
                and k.node.func.id == local.name:
            return local if local.is_module else None
        return _built_class(octx, k.node, depth + 1)
    if not isinstance(node, ast.ClassDef):
        return None
    cls = octx.analysis.classes.get(node.name)
    if cls is None or cls.node is not node or not cls.is_module:
        return None
    return cls
