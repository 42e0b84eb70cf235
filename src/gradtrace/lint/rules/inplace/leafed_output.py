"""GT618: an in-place write into the output of a frozen module that `requires_grad_(True)`
(a forward hook, or a call on the output) turned into a leaf that requires grad.

# NOTE [outputs made leaves]
A module whose weights are all frozen, run on an input that needs no grad (token ids), gives
back a tensor without history. ``output.requires_grad_(True)`` (Hugging Face's
``enable_input_require_grads()`` hook on the input embeddings, registered so that gradient
checkpointing and adapters get a graph; or ``emb(ids).requires_grad_(True)`` written out)
makes that tensor a *leaf* that requires grad. Autograd then refuses any in-place write into
it or into a view of it while grad is enabled: ``inputs_embeds[mask] = image_feats``,
``emb += x``, ``emb.view(-1, d).index_copy_(...)``, ``emb[i].scatter_(...)`` raise
``RuntimeError: a (view of a) leaf Variable that requires grad is being used in an in-place
operation.`` The same code with trainable embeddings runs (the output is then not a leaf and
the call does nothing): checked on torch 2.13, both ways.
Facts read here: which module the file makes such a leaf of (a hook function whose output
parameter gets ``requires_grad_()`` / ``requires_grad = True``, registered with
``<m>.register_forward_hook``; ``<m>(...).requires_grad_()``; ``out = <m>(...)`` then
``out.requires_grad_()``), and that the file freezes it (``requires_grad_(False)`` or
``requires_grad = False`` on a path naming the module or a module holding it, or a
``for p in <path>.parameters()`` loop doing so; ``Embedding.from_pretrained`` keeps its
default ``freeze=True``). The module is named by the attribute (or variable) it is held in.
"""
from __future__ import annotations

import ast
import re
from typing import Iterator

from gradtrace.findings import Finding
from gradtrace.lint.context import Context
from gradtrace.lint.names import dotted
from gradtrace.lint.nodes import of_types, peel, walk
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.inplace.expanded_write import scopes_holding, statements_holding
from gradtrace.lint.rules.leaf._writes import in_place_writes, own_statements

HOOKS = frozenset({"register_forward_hook"})
# a file that makes some output require grad, and freezes something (text gates)
MAKER_RE = re.compile(r"register_forward_hook|requires_grad_\(\s*(?:(?:requires_grad\s*=\s*)?"
                      r"True)?\s*\)|\.requires_grad\s*=\s*True")
FREEZE_RE = re.compile(r"requires_grad_\(\s*(?:requires_grad\s*=\s*)?False|requires_grad\s*="
                       r"\s*False|from_pretrained")
VIEWS = frozenset({"view", "view_as", "reshape", "flatten", "transpose", "permute", "squeeze",
                   "unsqueeze", "narrow", "select", "t", "unflatten", "movedim", "diagonal"})
STRIP = frozenset({"weight", "bias"})
PRETRAINED = ("Embedding.from_pretrained", "EmbeddingBag.from_pretrained")


def _chain(e: ast.AST) -> list[str] | None:
    """``self.llm.embed_tokens`` -> ['self', 'llm', 'embed_tokens']; None for other shapes."""
    d = dotted(e)
    return None if d is None else d.split(".")


def _returned_attr(ctx: Context, method: str) -> str | None:
    """The attribute every method ``method`` of the file's classes returns (``def
    get_input_embeddings(self): return self.embed_tokens``); None when not one."""
    found: set[str] = set()
    for cls in ctx.analysis.classes.values():
        fn = cls.methods.get(method)
        if fn is None:
            continue
        rets = [n for n in walk(fn) if isinstance(n, ast.Return)]
        for r in rets:
            c = _chain(r.value) if r.value is not None else None
            if c is None or len(c) != 2 or c[0] != "self":
                return None
            found.add(c[1])
    return found.pop() if len(found) == 1 else None


def _module_key(ctx: Context, e: ast.AST) -> tuple[str, list[str]] | None:
    """(the attribute or name holding the module, the path's words) of a module expression:
    ``self.llm.embed_tokens``, ``emb``, ``self.get_input_embeddings()`` (a method of the file
    returning ``self.<attr>``)."""
    if isinstance(e, ast.Call) and not e.args and isinstance(e.func, ast.Attribute):
        attr = _returned_attr(ctx, e.func.attr)
        base = _chain(e.func.value) or []
        return (attr, base + [attr]) if attr is not None else None
    c = _chain(e)
    return (c[-1], c) if c else None


def _sets_grad(stmt_or_expr: ast.AST, name: str) -> bool:
    """``name.requires_grad_()`` / ``name.requires_grad_(True)`` / ``name.requires_grad =
    True`` somewhere in the node."""
    for n in walk(stmt_or_expr):
        if isinstance(n, ast.Call) and _turns_on(n) and isinstance(n.func, ast.Attribute) \
                and isinstance(n.func.value, ast.Name) and n.func.value.id == name:
            return True
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                and n.value.value is True and any(
                    isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                    and isinstance(t.value, ast.Name) and t.value.id == name for t in n.targets):
            return True
    return False


def _turns_on(call: ast.Call) -> bool:
    """``x.requires_grad_()`` or ``x.requires_grad_(True)`` (keyword too)."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "requires_grad_"):
        return False
    vals = list(call.args) + [k.value for k in call.keywords if k.arg == "requires_grad"]
    return not vals or isinstance(vals[0], ast.Constant) and vals[0].value is True


def _turns_off(call: ast.Call) -> bool:
    """``x.requires_grad_(False)`` (keyword too)."""
    vals = list(call.args) + [k.value for k in call.keywords if k.arg == "requires_grad"]
    return bool(vals) and isinstance(vals[0], ast.Constant) and vals[0].value is False


def _hook_function(ctx: Context, h: ast.AST) -> ast.AST | None:
    if isinstance(h, ast.Lambda):
        return h
    name = h.id if isinstance(h, ast.Name) else h.attr if isinstance(h, ast.Attribute) else None
    if name is None:
        return None
    defs = [n for n in of_types(ctx.tree, (ast.FunctionDef, ast.AsyncFunctionDef))
            if n.name == name]
    return defs[0] if len(defs) == 1 else None


def _hook_leafs(ctx: Context, fn: ast.AST) -> bool:
    """The hook function makes its output (the last positional parameter) require grad."""
    params = fn.args.posonlyargs + fn.args.args  # type: ignore[attr-defined]
    if len(params) < 3:
        return False
    out = params[-1].arg
    body = fn.body if isinstance(fn.body, list) else [fn.body]  # type: ignore[attr-defined]
    return any(_sets_grad(s, out) for s in body)


FACT_WORDS = ("register_forward_hook", "requires_grad", "from_pretrained")


def _fact_nodes(ctx: Context) -> Iterator[ast.AST]:
    """The nodes of the statements that may hold a hook, a freeze or a pretrained table: a
    loop's own node, the whole of a simple statement."""
    for s, _ in statements_holding(ctx, FACT_WORDS):
        if isinstance(s, ast.For):
            yield s
        elif not hasattr(s, "body"):
            yield from walk(s)


class _Facts:
    """The file's modules whose output a hook makes a leaf, and its freeze paths."""

    def __init__(self, ctx: Context) -> None:
        self.hooked: dict[str, ast.AST] = {}
        self.frozen: list[list[str]] = []
        pretrained: set[str] = set()
        for n in _fact_nodes(ctx):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) \
                    and _frozen_pretrained(ctx, n.value):
                pretrained.update(t.attr for t in n.targets if isinstance(t, ast.Attribute))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                if n.func.attr in HOOKS and n.args:
                    h = _hook_function(ctx, n.args[0])
                    key = _module_key(ctx, n.func.value)
                    if h is not None and key is not None and _hook_leafs(ctx, h):
                        self.hooked.setdefault(key[0], n)
                elif n.func.attr == "requires_grad_" and _turns_off(n):
                    c = _chain(n.func.value)
                    if c:
                        self.frozen.append(c)
            elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) \
                    and n.value.value is False:
                for t in n.targets:
                    c = _chain(t) if isinstance(t, ast.Attribute) and t.attr == "requires_grad" \
                        else None
                    if c:
                        self.frozen.append(c[:-1])
            elif isinstance(n, ast.For) and isinstance(n.target, ast.Name) \
                    and isinstance(n.iter, ast.Call) and isinstance(n.iter.func, ast.Attribute) \
                    and n.iter.func.attr == "parameters":
                p = n.target.id
                if any(_freezes_name(s, p) for s in n.body):
                    c = _chain(n.iter.func.value)
                    if c:
                        self.frozen.append(c + ["<params>"])
        self.pretrained = frozenset(pretrained)

    def freezes(self, path: list[str]) -> bool:
        """Whether a freeze of the file names the module at ``path`` or one holding it."""
        words = set(path[1:]) if len(path) > 1 else set(path)
        if path[-1] in self.pretrained:
            return True
        for c in self.frozen:
            c = [w for w in c if w not in STRIP and w != "<params>"]
            if len(c) > 1 and c[-1] in words or len(c) == 1 and c[0] == path[-1]:
                return True
        return False


def _frozen_pretrained(ctx: Context, call: ast.Call) -> bool:
    """``nn.Embedding.from_pretrained(m)`` without ``freeze=False`` (True is its default)."""
    return (ctx.qualified_name(call.func) or "").endswith(PRETRAINED) and len(call.args) < 2 \
        and not any(k.arg == "freeze" and not (isinstance(k.value, ast.Constant)
                                               and k.value.value is True)
                    for k in call.keywords)


def _freezes_name(s: ast.stmt, p: str) -> bool:
    if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) \
            and s.value.value is False:
        return any(isinstance(t, ast.Attribute) and t.attr == "requires_grad"
                   and isinstance(t.value, ast.Name) and t.value.id == p for t in s.targets)
    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) \
            and isinstance(s.value.func, ast.Attribute) \
            and s.value.func.attr == "requires_grad_" and _turns_off(s.value):
        return isinstance(s.value.func.value, ast.Name) and s.value.func.value.id == p
    return False


def _base(e: ast.AST) -> str | None:
    """The name a write lands in: ``x``, ``x[i]``, ``x.view(-1, d)[j]``."""
    e = peel(e, VIEWS)
    return e.id if isinstance(e, ast.Name) else None


class InplaceWriteToOutputMadeLeaf(Rule):
    """A frozen module's output is made a leaf that requires grad (a forward hook calling
    `output.requires_grad_(True)`, as `enable_input_require_grads()` does, or
    `emb(ids).requires_grad_(True)`) and is then written in place:
    `inputs_embeds[video_mask] = video_embeds`, `text_embeds += extra`,
    `inputs_embeds[i].scatter_(...)`.

    Why: a module whose weights are frozen, given token ids, returns a tensor without
    history; `requires_grad_(True)` makes it a leaf, and autograd refuses an in-place write
    into a leaf that requires grad or into a view of it: `RuntimeError: a leaf Variable that
    requires grad is being used in an in-place operation.` (`a view of a leaf Variable ...`
    for `emb[i].scatter_(...)`, `emb.view(-1, d).index_copy_(...)`) at the first training
    forward (NOTE [outputs made leaves]; checked on torch 2.13). With trainable embeddings
    the same code runs, which is why it appears when the embeddings are frozen for adapters.
    Write out of place (`inputs_embeds = inputs_embeds.masked_scatter(mask, feats)`,
    `text_embeds = text_embeds + extra`) or clone first.
    Known limits: the freeze and the hook (or the call) must be in the file; the module is
    matched by the attribute or variable holding it; the write must be in the function that
    runs the module (through names bound to the output or a view of it); the module's input
    is not read (a frozen module given a tensor that requires grad returns a non-leaf, and
    writing it runs: token ids, the shape this rule is for, never require grad).
    """

    code = "GT618"
    name = "inplace-write-to-output-made-leaf"
    message = ("in-place {what} of `{name}`, the output of the frozen module `{module}` made a "
               "leaf that requires grad on line {line}: raises `RuntimeError: a [view of a] "
               "leaf Variable that requires grad is being used in an in-place operation.`; "
               "write out of place or clone it first")
    triggers = ("requires_grad",)
    examples = [
        Bad("""
            import torch
            import torch.nn as nn

            class VLM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.tokens = nn.Embedding(100, 8)
                    self.vision = nn.Linear(6, 8)
                    self.tokens.register_forward_hook(lambda m, i, out: out.requires_grad_(True))

                def forward(self, ids, pixels, mask):
                    h = self.tokens(ids)
                    h[mask] = self.vision(pixels)
                    return h

            model = VLM()
            model.tokens.requires_grad_(False)
            """, at=(13, 8)),
        Good("""
            import torch
            import torch.nn as nn

            class VLM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.tokens = nn.Embedding(100, 8)
                    self.vision = nn.Linear(6, 8)
                    self.tokens.register_forward_hook(lambda m, i, out: out.requires_grad_(True))

                def forward(self, ids, pixels, mask):
                    h = self.tokens(ids)
                    h = h.masked_scatter(mask.unsqueeze(-1), self.vision(pixels))
                    return h

            model = VLM()
            model.tokens.requires_grad_(False)
            """),
    ]

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        if not ctx.mentions("requires_grad", "register_forward_hook") \
                or not MAKER_RE.search(ctx.code) or not FREEZE_RE.search(ctx.code):
            return  # (each spelling of MAKER_RE holds one of the two words: a search of the
            # file's code for them, cached per word, rules out most files before the pattern)
        facts = _Facts(ctx)
        if not facts.frozen and not facts.pretrained:
            return
        words = ("requires_grad", *sorted(facts.hooked))
        for fn in scopes_holding(ctx, words):
            body = fn.body  # type: ignore[attr-defined]
            yield from self._scan(fn, sorted(own_statements(body), key=lambda s: s.lineno),
                                  facts, ctx)

    def _scan(self, fn: ast.AST, stmts: list[ast.stmt], facts: _Facts, ctx: Context
              ) -> Iterator[Finding]:
        made: dict[str, tuple[str, int]] = {}      # name -> (module, line made a leaf)
        pending: dict[str, tuple[str, int]] = {}   # frozen module's output, not yet a leaf
        views: dict[str, str] = {}                 # view name -> the leaf it views
        scope = None
        for s in stmts:
            for target, what in in_place_writes(s):
                base = _base(target)
                leaf = views.get(base, base) if base else None
                if leaf in made:
                    scope = scope or ctx.scope(fn)
                    if scope.grad_off_at(s) is not None:
                        continue
                    module, line = made[leaf]
                    yield self.report(s, ctx, what=what, name=base, module=module, line=line)
                    made.pop(leaf)
            for name in list(pending):
                if _sets_grad(s, name) and not isinstance(s, (ast.For, ast.While, ast.If)):
                    made[name] = (pending.pop(name)[0], s.lineno)
            if not isinstance(s, ast.Assign) or len(s.targets) != 1:
                continue
            t = s.targets[0]
            if not isinstance(t, ast.Name):
                continue
            for d in (made, pending, views):
                d.pop(t.id, None)
            got = self._made(s.value, facts, ctx)
            if got is not None:
                module, hook = got
                if hook is None:
                    pending[t.id] = (module, s.lineno)
                else:
                    made[t.id] = (module, hook or s.lineno)
                continue
            src = _base(s.value) if isinstance(s.value, (ast.Subscript, ast.Call, ast.Name)) \
                else None
            if src is not None and src != t.id and views.get(src, src) in made \
                    and _is_view(s.value):
                views[t.id] = views.get(src, src)

    @staticmethod
    def _made(v: ast.expr, facts: _Facts, ctx: Context) -> tuple[str, int | None] | None:
        """(module, the line making its output a leaf: 0 for ``v`` itself, None when not yet)
        when ``v`` runs a frozen module of the file."""
        direct = isinstance(v, ast.Call) and _turns_on(v)
        call = v.func.value if direct else v  # type: ignore[union-attr]
        if not isinstance(call, ast.Call) or not call.args:
            return None
        key = _module_key(ctx, call.func)
        if key is None or (ctx.analysis.classes.get(key[0]) is not None):
            return None
        if not facts.freezes(key[1]):
            return None
        hook = facts.hooked.get(key[0])
        return ".".join(key[1]), 0 if direct else hook.lineno if hook is not None else None


def _is_view(v: ast.expr) -> bool:
    if isinstance(v, ast.Name):
        return True
    if isinstance(v, ast.Subscript):
        parts = v.slice.elts if isinstance(v.slice, ast.Tuple) else [v.slice]
        return all(isinstance(p, (ast.Slice, ast.Constant, ast.Name)) or (
            isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant)) for p in parts)
    return isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) \
        and v.func.attr in VIEWS
