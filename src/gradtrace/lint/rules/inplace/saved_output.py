"""GT602, GT603: in-place writes into the output of an op that saved it for backward."""
from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import Context
from gradtrace.lint.rule import Bad, Good
from gradtrace.lint.rules.inplace._base import InplaceRule
from gradtrace.lint.rules.inplace._chained import chained_write, dropout_flag_site
from gradtrace.lint.rules.inplace._class_writes import CHAINED_RE
from gradtrace.lint.rules.inplace._helper_writes import HelperWrite, helper_writes
from gradtrace.lint.rules.inplace._ops import MODULE_WORDS
from gradtrace.lint.rules.inplace._saved import Producer, inplace_local, sequential_writes

ALL_WRITES = ("index", "aug", "arith", "method")


class InplaceWriteToSavedOutput(InplaceRule):
    """An in-place or masked/index write into the output of sigmoid/softmax/tanh/exp.

    Why: these ops save their *output* to compute their gradient (sigmoid' = y(1-y),
    softmax, tanh, exp, sqrt, relu ...). Writing into that output in place (`p[mask] = 0`,
    `p.clamp_(...)`, `p += 1`, an in-place ReLU on it) bumps its version counter and the next
    backward raises `RuntimeError: one of the variables needed for gradient computation has been
    modified by an inplace operation: [...], which is output 0 of Sigmoid, ...`
    (pytorch-facts.md#saved-tensor-inplace; checked op by op on torch 2.13, also when the write is
    under
    `no_grad`). Use the out-of-place form: `p = p.masked_fill(mask, 0)`, `p = p.clamp(...)`,
    or write into a `.clone()`.
    In an `nn.Sequential`, an in-place layer (`nn.Dropout(p, inplace=True)` with `p` not 0,
    `nn.ReLU(inplace=True)`, ...) right after a layer whose output is saved (an activation,
    or a Sequential or a module class of the file ending in one) is the same write: the VQA
    classifier's `nn.ReLU(), nn.Dropout(p, inplace=True)` raises at the first backward in
    training mode. A write chained on a module call (`conv(x).unsqueeze_(1)`) counts; in a loop
    over the blocks of an `nn.ModuleList`, one block ending in a saving op is enough.
    A write into a layer's result counts in any method the training code runs, not only
    `forward` (`head.forward_single(x)` called per level, a method `forward` calls through
    `self`, a Lightning `training_step`'s helpers: NOTE [trained methods]).
    A local name bound to an in-place layer (`drop = nn.Dropout(p, inplace=True)`, `relu2 =
    nn.ReLU(inplace=True)` in a script) writes the output it is given: reported where the flag
    is set. A helper of the file that writes its parameter in place (`def normalize_batch(b):
    b = b.div_(255)`) writes the saved output its caller hands it: reported at the helper's
    write, in a file that runs a backward (NOTE [parameter written in place]). `torch.linalg.eigh` saves both its outputs
    (`vals, vecs = torch.linalg.eigh(m)` then `vals = vals.clamp_min_(0)`: gpytorch's
    `_symeig`). A helper of the file that holds no backward counts as trained when a backward
    follows a call of it (NOTE [trained helpers]); so does a method of a plain class of the
    file that its (inherited) `__call__` runs, an instance called before a backward (a
    torch.distributions-style transform's `_call`).
    An in-place method chained on an output-saving op's unnamed result counts, the norms
    included (`d.norm(dim=-1).div_(2)`, `(x - y).exp().mul_(2)`,
    NOTE [chained saved output]); so does an in-place dropout attribute
    (`self.drop = nn.Dropout(p, inplace=True)`) run on such a result, named or not (`self.drop(self.mlp(x))`, the MLP ending in a ReLU):
    reported at the dropout's constructor, where the flag is.
    Known limits: reported before a `backward()` in the same function, in a module's `forward`
    (not in an eval-only branch, unless the file backpropagates through an instance it puts in
    eval mode only: NOTE [eval instance backpropagated]) and in a loss function (`focal_loss`); the Sequential case only
    in a file that runs a backward; of the other names, only a view bound once in a module's
    method is followed (`w = out[..., :n]; w /= c`, nflows#89); a
    local module (`gate = nn.Sigmoid()`, then `h = gate(x)` on a line naming no op) is followed
    from its binding, when that line names the op or the binding builds a torch.nn layer or a
    module class of the file (`crit = RootLoss()` whose `forward` returns `torch.sqrt(...)`).
    """

    code = "GT602"
    gate_statements = True
    name = "inplace-write-to-saved-output"
    message = ("this in-place write changes `{name}`, the output of `{op}` (line {line}) that "
               "backward needs: backward raises 'one of the variables needed for gradient "
               "computation has been modified by an inplace operation'")
    examples = [
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, y, ignore, opt):
                probs = torch.sigmoid(model(x))
                probs[ignore] = 0.0
                loss = F.binary_cross_entropy(probs, y)
                loss.backward()
                opt.step()
            """, at=(6, 4)),
        Bad("""
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, x):
                    attn = self.proj(x).softmax(dim=-1)
                    attn.masked_fill_(self.mask, 0.0)
                    return attn @ x
            """, at=(7, 8)),
        Bad("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, opt):
                gate = torch.sigmoid(model(x))
                out = F.relu(gate, inplace=True)
                out.sum().backward()
                opt.step()
            """, at=(6, 4)),
        Bad("""
            import torch

            def focal_loss(logits, targets, gamma=2.0):
                p = torch.sigmoid(logits)
                p[targets == 0] = 1 - p[targets == 0]
                return (-(1 - p) ** gamma * p.log()).mean()
            """, at=(5, 4)),
        Bad("""
            import torch

            a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
            b = a.sigmoid()
            b[1] = 2
            b.sum().backward()
            """, at=(5, 0)),
        Good("""
            import torch

            a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
            b = 1 / ((-a).exp() + 1)
            b[1] = 2
            b.sum().backward()
            """),
        Good("""
            import torch
            import torch.nn.functional as F

            def train_step(model, x, y, ignore, opt):
                probs = torch.sigmoid(model(x))
                probs = probs.masked_fill(ignore, 0.0)
                loss = F.binary_cross_entropy(probs, y)
                loss.backward()
                opt.step()
            """),
        Bad("""
            import torch

            def to_unit(t):
                t.clamp_(0.05, 0.95)
                return t

            def train_step(model, x, opt):
                p = torch.sigmoid(model(x))
                p = to_unit(p)
                p.log().sum().backward()
                opt.step()
            """, at=(4, 4)),
        Good("""
            import torch

            def to_unit(t):
                t = t.clone()
                t.clamp_(0.05, 0.95)
                return t

            def train_step(model, x, opt):
                p = torch.sigmoid(model(x))
                p = to_unit(p)
                p.log().sum().backward()
                opt.step()
            """),
        Good("""
            import torch

            @torch.no_grad()
            def predict(model, x):
                scores = model(x).sigmoid()
                scores[scores < 0.5] = 0
                return scores
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        old, chains = _statement_words(ctx)
        if old:  # "norm(" alone opens only the chain check below
            writes = [*self._writes(node, ctx, ("sig",)),
                      *self._writes(node, ctx, ("relu",), ("index", "method"))]
            for prod, stmt, kind, target, training in writes:
                yield self._emit602(prod, stmt, target, training, ctx)
        chained = chained_write(node, ctx) if chains and isinstance(node.func, ast.Attribute) \
            and node.func.attr.endswith("_") else None
        seen: set[int] = ctx.memo("gt6-reported-" + self.code, ctx.tree, set)
        if chained is not None and ctx.statement is not None and id(ctx.statement) not in seen:
            seen.add(id(ctx.statement))
            op_call, op = chained
            yield self.report(node, ctx, related=[Related(
                ctx.path, op_call.lineno, f"`{op}` saves its output for backward here",
                ctx.column(op_call))], name=ctx.source(op_call)[:40], op=op,
                line=op_call.lineno)
        f = node.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) == "Sequential":
            for prod, layer in sequential_writes(node, ctx):  # `nn.ReLU(), nn.Dropout(p, True)`
                yield self.report(layer, ctx, related=self._related(prod, True, ctx),
                                  name=ctx.source(prod.call)[:40], op=prod.op,
                                  line=prod.call.lineno)

    triggers = (*InplaceRule.triggers, *MODULE_WORDS, "Sequential", "norm(")

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """``p = self.gate(x)`` where ``self.gate``'s result is a sigmoid/softmax/... output
        (NOTE [module results]), then ``p[m] = 0`` in ``forward``, the line naming no op."""
        if not ctx.mentions(*_OLD_WORDS):  # (per word, cached, absent ones from the
            # identifier prefilter: the same answer as `any(w in ctx.code ...)`)
            return  # only "norm(" in the file: the chain check of visit_Call is all there is
        for prod, stmt, target in self._block_writes(
                ctx, (("sig",), ALL_WRITES), (("relu",), ("index", "method"))):
            yield self._emit602(prod, stmt, target, True, ctx)
        for prod, stmt, _, target, training in [
                *self._instance_writes(ctx, ("sig",)),
                *self._instance_writes(ctx, ("relu",), ("index", "method"))]:
            yield self._emit602(prod, stmt, target, training, ctx)  # `crit = RootLoss()`
        for h in helper_writes(ctx):  # `normalize_batch(y)` writes `batch.div_(255)`
            if h.prod.family == "sig" or h.write.kind in ("index", "method"):
                yield self.report(h.write.stmt, ctx, related=_helper_related(h, self, ctx),
                                  name=ctx.source(h.call.args[h.write.index]),
                                  op=h.prod.op, line=h.prod.call.lineno)

    def _emit602(self, prod: Producer, stmt: ast.stmt, target: ast.AST,
                 training: ast.Call | bool, ctx: Context) -> Finding:
        name = ctx.source(target.value if isinstance(target, ast.Subscript) else target)
        if isinstance(target, ast.Call):
            name = ctx.source(target.args[0] if not isinstance(target.func, ast.Attribute)
                              or not target.func.attr.endswith("_") else target.func.value)
        related = self._related(prod, training, ctx)
        layer = inplace_local(target.func, target.lineno, ctx, ctx.scope()) if isinstance(
            target, ast.Call) and isinstance(target.func, ast.Name) else None
        if layer is not None:  # `relu2 = nn.ReLU(inplace=True)`: the flag to change is there
            related.insert(0, Related(ctx.path, target.lineno, f"`{ctx.source(target)}` "
                                      f"overwrites `{name}` here", ctx.column(target)))
            stmt = layer  # type: ignore[assignment]
        drop = dropout_flag_site(target, ctx)
        if drop is not None:  # `self.dropout = nn.Dropout(p, inplace=True)`: the flag
            related.insert(0, Related(ctx.path, target.lineno, f"`{ctx.source(target)[:40]}` "
                                      f"overwrites `{name}` here", ctx.column(target)))
            stmt = drop  # type: ignore[assignment]
        return self.report(stmt, ctx, related=related, name=name,
                           op=prod.op, line=prod.call.lineno)  # type: ignore[attr-defined]


class InplaceAddToReluOutput(InplaceRule):
    """`out += identity` right after `out = relu(out)`: backward needs the ReLU's output.

    Why: ReLU (in-place or not), and LeakyReLU and ELU in place, compute their gradient from
    their *output*, so they save it (out of place, LeakyReLU and ELU save their input).
    `out += identity` writes into that saved output and backward raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation: [...], which is output 0 of Relu, ...`
    (pytorch-facts.md#saved-tensor-inplace,
    checked on torch 2.13). A residual block adds the identity *before* the ReLU
    (`out = self.bn2(out); out += identity; out = self.relu(out)`), or uses `out = out +
    identity`. ReLU6/Hardtanh, SiLU and Hardswish do not save their output and are not reported.
    The module may be any block whose result a ReLU makes (NOTE [module results]): an
    `nn.Sequential` ending in one (nested, or built from a list), a module class or helper of
    the file whose `forward`/`__call__` returns one (on the branch its constructor's flag
    picks), a block of an `nn.ModuleList` called by index or in a loop; and an element of a
    list of such outputs (`laterals = [conv(x) for conv, x in zip(self.lateral_convs, xs)]`,
    then `laterals[i - 1] += up`: the FPN top-down path), unless an element is replaced first.
    The activation may be handed to the block by the code that builds it (`self.act = act`,
    `Block(d, nn.ReLU())`, through one more `__init__`: NOTE [module given by the builder]); the
    write may go through a running sum that starts as the output (`if i == 0: acc = out` /
    `else: acc += out`: NOTE [accumulator alias]), take one element of a block that returns a
    tuple (`c2, c3 = fpem(c2, c3)`: NOTE [tuple module results]), or be spelt in a `return`
    (`return out.add_(x)`).
    Known limits: the module must be assigned once, in `__init__` of the same class; when its
    `forward` returns different things on branches no constructor argument decides, nothing is
    reported.
    """

    code = "GT603"
    gate_statements = True
    name = "inplace-add-to-relu-output"
    message = ("`{stmt}` writes in place into `{name}`, the output of `{op}` (line {line}) "
               "that backward needs: backward raises 'one of the variables needed for gradient "
               "computation has been modified by an inplace operation'")
    fix_title = "Add out of place (`out = out + identity`)"
    fix_safety = "safe"
    examples = [
        Bad("""
            from torch import nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3, padding=1)
                    self.bn = nn.BatchNorm2d(c)
                    self.relu = nn.ReLU(inplace=True)

                def forward(self, x):
                    identity = x
                    out = self.relu(self.bn(self.conv(x)))
                    out += identity
                    return out
            """, fixed="""
            from torch import nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3, padding=1)
                    self.bn = nn.BatchNorm2d(c)
                    self.relu = nn.ReLU(inplace=True)

                def forward(self, x):
                    identity = x
                    out = self.relu(self.bn(self.conv(x)))
                    out = out + identity
                    return out
            """, at=(13, 8)),
        Good("""
            from torch import nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3, padding=1)
                    self.bn = nn.BatchNorm2d(c)
                    self.relu = nn.ReLU(inplace=True)

                def forward(self, x):
                    identity = x
                    out = self.bn(self.conv(x))
                    out += identity
                    return self.relu(out)
            """),
        Bad("""
            from torch import nn

            class Residual(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.body = nn.Sequential(
                        nn.Conv2d(c, c, 3, padding=1),
                        nn.ReLU(inplace=True),
                    )

                def forward(self, x):
                    out = self.body(x)
                    out += x
                    return out
            """, fixed="""
            from torch import nn

            class Residual(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.body = nn.Sequential(
                        nn.Conv2d(c, c, 3, padding=1),
                        nn.ReLU(inplace=True),
                    )

                def forward(self, x):
                    out = self.body(x)
                    out = out + x
                    return out
            """, at=(13, 8)),
        Good("""
            from torch import nn

            class Residual(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.body = nn.Sequential(nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))

                def forward(self, x):
                    out = self.body(x)
                    out += x
                    return out
            """),
        Good("""
            import torch.nn.functional as F

            def forward(self, x):
                out = F.relu6(self.conv(x), inplace=True)
                out += x
                return out
            """),
        Bad("""
            import torch.nn as nn
            class Coupling(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
                def forward(self, x):
                    params = self.net(x)
                    widths = params[..., :4]
                    widths /= 2.0
                    return widths.sum() + params.sum()
            def step(c, x):
                c(x).backward()
            """, at=(9, 8)),
    ]

    triggers = (*InplaceRule.triggers, "ReLU", "ELU", "Sequential")

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        writes = self._writes(node, ctx, ("relu",), ("aug", "arith"))
        for prod, stmt, kind, target, training in writes:
            yield self._emit(prod, stmt, target, training, ctx)

    def visit_Module(self, node: ast.Module, ctx: Context) -> Iterator[Finding]:
        """``out = self.block(x)`` where ``self.block``'s result is a ReLU's output
        (NOTE [module results]: an ``nn.Sequential`` whose last layer is one, a module class
        or a helper of the file whose ``forward`` returns one, a block of an
        ``nn.ModuleList``), then ``out += x`` in ``forward``: neither the call's line nor the class need name the
        activation (once per file: the class lines may hold no trigger word)."""
        for prod, stmt, target in self._block_writes(ctx, (("relu",), ("aug", "arith"))):
            yield self._emit(prod, stmt, target, True, ctx)
        for prod, stmt, _, target, training in self._instance_writes(
                ctx, ("relu",), ("aug", "arith")):
            yield self._emit(prod, stmt, target, training, ctx)  # `block = Block()`
        for h in helper_writes(ctx):
            if h.prod.family == "relu" and h.write.kind in ("aug", "arith"):
                f = self._emit(h.prod, h.write.stmt, h.write.target, h.backward, ctx)
                yield dataclasses.replace(f, related=tuple(_helper_related(h, self, ctx)))

    def _emit(self, prod: Producer, stmt: ast.stmt, target: ast.AST,
              training: ast.Call | bool, ctx: Context) -> Finding:
        fix = None
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(stmt.op))
            if op:
                n = stmt.target.id
                fix = self.fix(ctx.edit(stmt, f"{n} = {n} {op} {_paren(stmt.value, ctx)}"))
        name = ctx.source(target) if not isinstance(target, ast.Call) \
            else ctx.source(target.func.value)  # type: ignore[attr-defined]
        return self.report(stmt, ctx, related=self._related(prod, training, ctx), fix=fix,
                           stmt=ctx.source(stmt), name=name, op=prod.op,
                           line=prod.call.lineno)  # type: ignore[attr-defined]


_OLD_WORDS = (*InplaceRule.triggers, *MODULE_WORDS, "Sequential")


def _statement_words(ctx: Context) -> tuple[bool, bool]:
    """(the statement's code holds a trigger word other than ``norm(``, it holds an in-place
    method chained on a call), once per statement."""
    s = ctx.statement
    if s is None:
        return True, False

    def make() -> tuple[bool, bool]:
        text = "\n".join(ctx.code_lines[s.lineno - 1:s.end_lineno or s.lineno])
        return any(w in text for w in _OLD_WORDS), CHAINED_RE.search(text) is not None
    return ctx.memo("gt602-words", s, make)


def _helper_related(h: HelperWrite, rule: InplaceRule, ctx: Context) -> list[Related]:
    """The call that hands the saved output to the helper, then the op and the backward."""
    return [Related(ctx.path, h.call.lineno, f"`{ctx.source(h.call)}` passes the output of "
                    f"`{h.prod.op}` to `{h.write.fn.name}`, which writes it in place",
                    ctx.column(h.call)), *rule._related(h.prod, h.backward, ctx)]


def _paren(e: ast.expr, ctx: Context) -> str:
    src = ctx.source(e)
    simple = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
    return src if isinstance(e, simple) else f"({src})"
