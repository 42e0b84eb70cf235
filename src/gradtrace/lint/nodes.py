"""A faster ``ast.walk``: about 2x, by skipping the ``ctx``/``op`` leaves no rule looks at.

Use :func:`walk` instead of :func:`ast.walk` in rules and analyses: the checker's budget is
close to the cost of ``ast.parse`` itself.
"""
from __future__ import annotations

import ast
from bisect import bisect_left
from typing import Iterator

from gradtrace.lint.def_order import breadth_first_defs
from gradtrace.lint.node_types import by_type, typed

_FIELDS: dict[type, tuple[str, ...]] = {}
_AST = ast.AST


def child_fields(t: type) -> tuple[str, ...]:
    """The fields of node type ``t`` that can hold child nodes (``ctx``/``op`` excluded, and
    the fields its grammar types as names, numbers or constants: NOTE [leaf fields])."""
    fs = _FIELDS.get(t)
    if fs is None:
        leaves = _leaf_fields(t)
        fs = _FIELDS[t] = tuple(f for f in t._fields  # type: ignore[attr-defined]
                                if f not in ("ctx", "op") and f not in leaves)
    return fs


# NOTE [leaf fields]
# Every walk of the checker asks each node for each of its fields and tests what it gets; a
# third of the nodes of real code are ``Name`` and ``Constant`` leaves, whose fields (``id``;
# ``value``, ``kind``) never hold a node. The grammar says so: ``ast`` documents each node
# type by its ASDL signature (``Name(identifier id, expr_context ctx)``), and a field typed
# ``identifier``, ``int``, ``string`` or ``constant`` (optional or a sequence alike) holds no
# node. Those fields are left out of :func:`child_fields`: the walks yield the same nodes in
# the same order, with fewer lookups (a type without such a signature keeps all its fields).
_LEAF_TYPES = frozenset({"identifier", "int", "string", "constant"})


def _leaf_fields(t: type) -> frozenset[str]:
    """The fields of ``t`` its ASDL signature types as non-nodes (NOTE [leaf fields])."""
    doc = (t.__doc__ or "").partition("\n")[0]
    name = getattr(t, "__name__", "")
    if not (doc.startswith(name + "(") and doc.endswith(")")) or t.__module__ != "ast":
        return frozenset()
    out = set()
    for part in doc[len(name) + 1:-1].split(","):
        typ, _, field = part.strip().rpartition(" ")
        if typ.rstrip("?*") in _LEAF_TYPES:
            out.add(field)
    return frozenset(out)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``node`` (itself included), in no particular order (the same order
    every time: a stack walk that visits the last child first; NOTE [walk index])."""
    state = _FILE[0]
    if state is not None:
        spans = state.spans
        if spans is not None:
            span = spans.get(id(node))
            if span is not None:
                order = state.order
                if order[span[0]] is node:
                    return iter(order[span[0]:span[1]])
        elif state.budget <= 0 or node is state.tree and state.budget <= state.half:
            state.build()  # (NOTE [whole-tree walk])
            return walk(node)
        else:
            return _walk(node, state)
    return _walk(node, None)


def _walk(node: ast.AST, state: _FileIndex | None) -> Iterator[ast.AST]:
    stack = [node]
    pop, push = stack.pop, stack.append
    seen = 0
    fields = _FIELDS.get
    try:
        while stack:
            n = pop()
            seen += 1
            yield n
            fs = fields(n.__class__)
            for f in child_fields(n.__class__) if fs is None else fs:
                v = getattr(n, f, None)
                if v is None:
                    continue
                if v.__class__ is list:
                    for x in v:
                        if isinstance(x, _AST):
                            push(x)
                elif isinstance(v, _AST):
                    push(v)
    finally:
        if state is not None:
            state.budget -= seen


def bfs_walk(node: ast.AST) -> Iterator[ast.AST]:
    """:func:`ast.walk`: the same nodes (``ctx``/``op`` leaves included) in the same order
    (breadth first), about twice as fast (no generator per node for its fields and children).
    For the walks whose order or leaves matter; :func:`walk` is faster still."""
    todo = [node]
    add = todo.append
    fields = _ALL_FIELDS.get
    for n in todo:  # the list grows as it is read: a queue
        fs = fields(n.__class__)
        for f in _all_fields(n.__class__) if fs is None else fs:
            try:
                v = getattr(n, f)
            except AttributeError:
                continue
            if isinstance(v, _AST):
                add(v)
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, _AST):
                        add(x)
        yield n


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def _all_fields(t: type) -> tuple[str, ...]:
    """The fields of ``t`` that can hold nodes, ``ctx``/``op`` included (NOTE [leaf fields])."""
    fs = _ALL_FIELDS.get(t)
    if fs is None:
        leaves = _leaf_fields(t)
        fs = _ALL_FIELDS[t] = tuple(f for f in t._fields if f not in leaves)  # type: ignore[attr-defined]
    return fs


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """:func:`ast.iter_child_nodes` as a list: the same nodes (``ctx``/``op`` included) in
    the same order, without its two generators."""
    out = []
    add = out.append
    fs = _ALL_FIELDS.get(node.__class__)
    for f in _all_fields(node.__class__) if fs is None else fs:
        try:
            v = getattr(node, f)
        except AttributeError:
            continue
        if isinstance(v, _AST):
            add(v)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, _AST):
                    add(x)
    return out

# NOTE [walk index]
# The rules and analyses of a file walk the same function bodies again and again (on dense
# training code each node is walked ~4 times, a fifth of the checker's time). Every walk of a
# subtree yields its nodes in one fixed order (a stack walk that pops the last child first),
# and in that order each subtree is one contiguous run of the walk of the whole file. So once
# a file's walks have visited about as many nodes as the file holds, the whole tree is walked
# once more into one list, with each node's run (start, end), and every later walk of a node
# of that tree is a slice of the list: the same nodes in the same order, without the per-node
# work of the generator. Files whose rules look at a small part of the tree (library code:
# most statements are quiet) never reach the budget and never pay for the index. The index
# belongs to the file being checked (``begin_file``/``end_file``, called by the Context); a
# node that is not in it (another tree, a synthesized node) is walked as before, and a slice
# is only used when the list holds that very node at the run's start.
WALK_BUDGET_CHARS = 4  # walk budget: one node per 4 characters of source, ~ the whole tree
# NOTE [whole-tree walk]
# A walk of the whole tree spends as much budget as the tree holds nodes. Asked once half the
# budget is spent, it builds the index instead: that walk is the build's own walk, where the
# walk and then the build a few rules later walked the tree twice (generated training code:
# the first whole-tree walk comes at half the budget and spends the rest). Library code asks
# for the whole tree early or not at all (in every 8th transformers file, one file in 364).


class _FileIndex:
    __slots__ = ("tree", "budget", "half", "order", "spans", "typed", "kinds", "scopes")

    def __init__(self, tree: ast.AST, budget: int) -> None:
        self.tree = tree
        self.budget, self.half = budget, budget // 2
        self.order: list[ast.AST] = []
        self.spans: dict[int, tuple[int, int]] | None = None
        # node types -> (positions in ``order`` of the nodes of those types, the nodes)
        self.typed: dict[tuple[type, ...], tuple[list[int], list[ast.AST]]] = {}
        self.kinds: dict[type, list[int]] | None = None  # positions by type
        self.scopes: list[ast.AST] | None = None  # function_scopes of the tree

    def build(self) -> None:
        """One walk of the whole tree in :func:`walk`'s order, with each node's run."""
        order: list[ast.AST] = []
        spans: dict[int, tuple[int, int]] = {}
        stack: list = [self.tree]
        pop, push, add, fields = stack.pop, stack.append, order.append, _FIELDS.get
        while stack:
            n = pop()
            c = n.__class__
            if c is int:  # the end of the run that starts at n
                spans[id(order[n])] = (n, len(order))
                continue
            i = len(order)
            add(n)
            fs = fields(c)
            if fs is None:
                fs = child_fields(c)
            if not fs:  # `Name`, `Constant`: a third of the nodes, leaves by their type
                spans[id(n)] = (i, i + 1)
                continue
            mark = len(stack)
            push(i)
            for f in fs:
                v = getattr(n, f, None)
                if v is None:
                    continue
                if v.__class__ is list:
                    for x in v:
                        if isinstance(x, _AST):
                            push(x)
                elif isinstance(v, _AST):
                    push(v)
            if len(stack) == mark + 1:  # a leaf: its run is itself
                pop()
                spans[id(n)] = (i, i + 1)
        self.order, self.spans = order, spans


_FILE: list[_FileIndex | None] = [None]


def of_types(node: ast.AST, types: tuple[type, ...]) -> list[ast.AST]:
    """The nodes of ``walk(node)`` that are instances of ``types``, in that order.

    With the file's walk index (NOTE [walk index]) this is a bisection into the positions of
    the file's nodes of those types, found once: asking it for every statement of a function
    costs the nodes found, not a walk of each statement (nested bodies walked again at every
    level of nesting)."""
    state = _FILE[0]
    if state is not None and state.spans is None and (state.budget <= 0 or (
            node is state.tree and state.budget <= state.half)):  # NOTE [whole-tree walk]
        state.build()
    if state is not None and state.spans is not None:
        span = state.spans.get(id(node))
        order = state.order
        if span is not None and order[span[0]] is node:
            got = state.typed.get(types)
            if got is None:  # from the nodes grouped by type once per file:
                groups = state.kinds  # NOTE [typed positions] in gradtrace.lint.node_types
                if groups is None:
                    groups = state.kinds = by_type(order)
                got = state.typed[types] = typed(groups, order, types)
            pos, found = got
            return found[bisect_left(pos, span[0]):bisect_left(pos, span[1])]
    if state is not None and state.spans is not None:
        return [n for n in walk(node) if isinstance(n, types)]  # a node of another tree
    return _collect(node, types, state)


def _collect(node: ast.AST, types: tuple[type, ...], state: _FileIndex | None
             ) -> list[ast.AST]:
    """``[n for n in _walk(node, state) if isinstance(n, types)]`` without the generator."""
    out: list[ast.AST] = []
    add = out.append
    stack = [node]
    pop, push = stack.pop, stack.append
    fields = _FIELDS.get
    seen = 0
    while stack:
        n = pop()
        seen += 1
        if isinstance(n, types):
            add(n)
        fs = fields(n.__class__)
        for f in child_fields(n.__class__) if fs is None else fs:
            v = getattr(n, f, None)
            if v is None:
                continue
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, _AST):
                        push(x)
            elif isinstance(v, _AST):
                push(v)
    if state is not None:
        state.budget -= seen
    return out


def begin_file(tree: ast.AST, size: int) -> None:
    """Walks from now on are of ``tree``'s file, ``size`` characters long (NOTE [walk index])."""
    _FILE[0] = _FileIndex(tree, size // WALK_BUDGET_CHARS)


def end_file(tree: ast.AST) -> None:
    """Drop the walk index of ``tree``'s file (nothing of a file outlives it: NOTE [gc])."""
    state = _FILE[0]
    if state is not None and state.tree is tree:
        _FILE[0] = None


def children(node: ast.AST) -> Iterator[ast.AST]:
    """Direct child nodes of ``node`` (``ctx``/``op`` excluded), in field order."""
    for f in child_fields(node.__class__):
        v = getattr(node, f, None)
        if v is None:
            continue
        if v.__class__ is list:
            for x in v:
                if isinstance(x, _AST):
                    yield x
        elif isinstance(v, _AST):
            yield v


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement nested in ``node`` (bodies only, no expressions: cheaper than ast.walk)."""
    stack = [node]
    pop, extend, bodies = stack.pop, stack.extend, _BODIES.get
    while stack:
        n = pop()
        fs = bodies(n.__class__)
        if fs is None:
            fs = _body_fields(n.__class__)
        for field in fs:
            sub = getattr(n, field, None)
            if sub:
                extend(reversed(sub))
        if isinstance(n, ast.stmt):
            yield n


BODY_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")  # nested statements
_BODIES: dict[type, tuple[str, ...]] = {}


def _body_fields(t: type) -> tuple[str, ...]:
    """The statement-list fields of node type ``t``, in :func:`statements`' order (a type
    that is no ``ast`` node, or a synthesized one, is asked for all of them)."""
    fs = _BODIES.get(t)
    if fs is None:
        own = getattr(t, "_fields", None)
        fs = _BODIES[t] = BODY_FIELDS if own is None or t.__module__ != "ast" else tuple(
            f for f in BODY_FIELDS if f in own)
    return fs


_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def scope_nodes(fn: ast.AST, defs: bool = False) -> Iterator[ast.AST]:
    """The nodes of ``fn`` (a function or the module) outside nested functions, lambdas and
    classes (in no set order); with ``defs``, those nested definitions too, not entered."""
    todo = list(child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, _NESTED):
            if defs:
                yield n
            continue
        yield n
        todo.extend(child_nodes(n))


def scope_statements(fn: ast.AST) -> list[ast.AST]:
    """The statements (except handlers, match cases) among :func:`scope_nodes` of ``fn``, in
    its order: its pre-order walk pruned to the statement-list fields (an expression holds no
    statement), which leaves the rest in the same order; a fifth of the nodes."""
    out: list[ast.AST] = []
    todo = [x for f in _stmt_fields(fn.__class__) for x in getattr(fn, f, None) or ()]
    pop, push, add = todo.pop, todo.extend, out.append
    while todo:
        n = pop()
        if isinstance(n, _NESTED):
            continue
        add(n)
        fs = _STMT_FIELDS.get(n.__class__)
        for f in _stmt_fields(n.__class__) if fs is None else fs:
            v = getattr(n, f, None)
            if v:
                push(v)
    return out


_STMT_FIELDS: dict[type, tuple[str, ...]] = {}


def _stmt_fields(t: type) -> tuple[str, ...]:  # in ``_fields`` order, as child_nodes
    fs = _STMT_FIELDS[t] = tuple(f for f in getattr(t, "_fields", ()) if f in BODY_FIELDS)
    return fs


def holds_line(lines: list[int], first: int, last: int) -> bool:
    """Whether the sorted ``lines`` hold one from ``first`` to ``last`` (a bisection)."""
    i = bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


def scope_nodes_on(fn: ast.AST, lines: list[int]) -> Iterator[ast.AST]:
    """:func:`scope_nodes` of ``fn`` leaving out every statement whose lines hold none of the
    sorted ``lines`` (with all it holds): the same nodes on those lines, in the same order
    (a node lies within the lines of its statement)."""
    todo = list(child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, _NESTED) or isinstance(n, ast.stmt) and not holds_line(
                lines, n.lineno, n.end_lineno or n.lineno):
            continue
        yield n
        todo.extend(child_nodes(n))


def function_scopes(tree: ast.AST) -> Iterator[ast.AST]:
    """The module, then every function of it (nested ones included), breadth first; found once
    for the file being checked (a dozen rules and facts ask)."""
    state = _FILE[0]
    got = state.scopes if state is not None and state.tree is tree else None
    if got is None:
        got = [tree, *breadth_first_defs(tree)]  # the defs of bfs_walk(tree), in its order
        if state is not None and state.tree is tree:
            state.scopes = got
    return iter(got)


def parent_map(tree: ast.AST) -> dict[int, ast.AST]:
    """``id(child) -> parent`` for every node under ``tree`` (NOTE [one parent map]): the
    dict ``{id(c): n for n in walk(tree) for c in ast.iter_child_nodes(n)}``, the same items
    in the same order, without two generators per node (``ctx``/``op`` children included)."""
    out: dict[int, ast.AST] = {}
    fields = _ALL_FIELDS.get
    for n in walk(tree):
        for f in fields(n.__class__) or _all_fields(n.__class__):
            v = getattr(n, f, None)
            if v.__class__ is list:
                for x in v:
                    if isinstance(x, _AST):
                        out[id(x)] = n
            elif isinstance(v, _AST):
                out[id(v)] = n
    return out


def peel(e: ast.AST, methods: frozenset[str] | set[str], limit: int = -1) -> ast.AST:
    """What a chain of subscripts and calls of ``methods`` is taken from: ``x`` for
    ``x[i]``, ``x.view(-1, d)[j]``, ``x[:n].clone()`` (``methods`` = views, same-dtype or
    same-data methods, as the caller means); at most ``limit`` links when ``limit`` >= 0."""
    while limit != 0:
        if isinstance(e, ast.Subscript):
            e = e.value
        elif isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr in methods:
            e = e.func.value
        else:
            break
        limit -= 1
    return e


def same_block(root: ast.AST, a: ast.stmt, b: ast.stmt) -> bool:
    """``a`` and ``b`` are statements of one block (a body, an ``else``, a ``finally``) under
    ``root``."""
    for n in walk(root):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and any(x is a for x in block):
                return any(x is b for x in block)
    return False
