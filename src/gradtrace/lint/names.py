"""Import and alias resolution: what a name or attribute chain means ("torch.no_grad").

`import torch as T`, `from torch import no_grad`, `import torch.nn.functional as F` and
`from torch.optim import SGD` all resolve. Common ecosystem spellings are normalised
(``torch.nn.functional`` stays as written; ``torch.autograd.grad_mode.no_grad`` becomes
``torch.no_grad``) so rules compare one canonical name.
"""
from __future__ import annotations

import ast

# Long import paths users write, mapped to the name rules compare against.
CANONICAL = {
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.enable_grad": "torch.enable_grad",
    "torch.autograd.grad_mode.enable_grad": "torch.enable_grad",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.modules.container.ModuleList": "torch.nn.ModuleList",
    "torch.nn.modules.container.ModuleDict": "torch.nn.ModuleDict",
    "torch.nn.modules.container.Sequential": "torch.nn.Sequential",
    "torch.nn.modules.container.ParameterList": "torch.nn.ParameterList",
    "torch.nn.modules.container.ParameterDict": "torch.nn.ParameterDict",
    "torch.utils.checkpoint": "torch.utils.checkpoint",
    "torch.Tensor.detach": "torch.Tensor.detach",
}


class Imports:
    """A file's import table: local name -> qualified dotted name."""

    __slots__ = ("aliases", "package")

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.package: set[str] = set()  # names bound by relative imports (another file)

    def add(self, node: ast.Import | ast.ImportFrom) -> None:
        """Record what an import statement binds."""
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self.aliases[a.asname] = a.name
                else:
                    top = a.name.partition(".")[0]
                    self.aliases[top] = top
            return
        if node.level or not node.module:
            # relative imports: the user's own package; the names stay unresolved
            self.package.update(a.asname or a.name for a in node.names if a.name != "*")
            return
        for a in node.names:
            if a.name != "*":
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def qualified_name(self, node: ast.AST) -> str | None:
        """``torch.nn.functional.relu`` for ``F.relu`` after ``import torch.nn.functional as F``.

        Returns None for anything that is not a (resolvable) name or attribute chain.
        Unresolved local names are returned as written (``model.zero_grad``).
        """
        if node.__class__ is ast.Name:  # the most asked: one name, nothing to join
            base = self.aliases.get(node.id, node.id)  # type: ignore[attr-defined]
            return CANONICAL.get(base, base)
        if node.__class__ is ast.Attribute and node.value.__class__ is ast.Name:  # `F.relu`
            v = node.value.id  # type: ignore[attr-defined]
            name = self.aliases.get(v, v) + "." + node.attr  # type: ignore[attr-defined]
            return CANONICAL.get(name, name)
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id, node.id)
        parts.append(base)
        name = ".".join(reversed(parts))
        return CANONICAL.get(name, name)

    def is_imported(self, local: str) -> bool:
        return local in self.aliases

    def add_callable_aliases(self, body: list[ast.stmt]) -> None:
        """Record the module-level names bound once to a torch callable: ``Opt =
        torch.optim.Adam`` or ``make_opt = partial(torch.optim.AdamW, lr=1e-3)`` (keywords only):
        calling the name calls that callable with the same positional arguments, so
        ``make_opt(model.parameters())`` means ``torch.optim.AdamW(model.parameters())``. A
        name bound twice at module level, or also imported, is left as written."""
        seen: dict[str, str | None] = {}
        for s in body:
            targets = s.targets if isinstance(s, ast.Assign) else \
                [s.target] if isinstance(s, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        seen[n.id] = None if n.id in seen else \
                            self._callable_of(s.value) if len(targets) == 1 \
                            and t is n else None  # type: ignore[union-attr]
        for name, q in seen.items():
            if q is not None and name not in self.aliases:
                self.aliases[name] = q

    def _callable_of(self, value: ast.AST | None) -> str | None:
        if isinstance(value, ast.Call) and len(value.args) == 1 and \
                self.qualified_name(value.func) == "functools.partial" and \
                all(k.arg for k in value.keywords):
            value = value.args[0]
        if not isinstance(value, ast.Attribute):
            return None
        q = self.qualified_name(value)
        return q if q is not None and q.startswith("torch.") else None


def dotted(node: ast.AST) -> str | None:
    """The dotted spelling of a Name/Attribute chain (``self.layers``), without resolution."""
    if node.__class__ is ast.Name:  # the most asked shapes: nothing to join
        return node.id  # type: ignore[attr-defined]
    if node.__class__ is ast.Attribute and node.value.__class__ is ast.Name:
        return node.value.id + "." + node.attr  # type: ignore[attr-defined]
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def indexed_path(node: ast.AST) -> str | None:
    """:func:`dotted`, and a module reached by a constant index or slice on the way
    (``model[0]``, ``model.features[:10]``, ``net.blocks[-1].fc``): the spelling a freeze of
    that part is matched by. A computed index (``layers[i]``) gives None."""
    plain = dotted(node)
    if plain is not None or not isinstance(node, (ast.Attribute, ast.Subscript)):
        return plain
    if isinstance(node, ast.Attribute):
        base = indexed_path(node.value)
        return None if base is None else base + "." + node.attr
    if not _constant_index(node.slice):
        return None
    base = indexed_path(node.value)
    return None if base is None else f"{base}[{ast.unparse(node.slice)}]"


def _constant_index(e: ast.AST | None) -> bool:
    if e is None:
        return True
    if isinstance(e, ast.Slice):
        return all(_constant_index(x) for x in (e.lower, e.upper, e.step))
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, int)


def scaled_name(value: ast.AST | None) -> str | None:
    """The name whose shape ``value`` keeps when it only scales it by a number: ``one * -1``,
    ``-one``, ``2.0 * one`` (a name and one number literal)."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.operand, ast.Name):
        return value.operand.id
    if isinstance(value, ast.BinOp):
        sides = (value.left, value.right)
        names = [x for x in sides if isinstance(x, ast.Name)]
        nums = [x for x in sides if isinstance(x, ast.Constant) or isinstance(x, ast.UnaryOp)
                and isinstance(x.operand, ast.Constant)]
        if len(names) == 1 and len(nums) == 1:
            return names[0].id
    return None
