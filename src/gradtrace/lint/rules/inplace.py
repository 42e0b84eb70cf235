"""GT6xx: in-place writes into tensors that autograd saved for backward.

Autograd saves some tensors to compute gradients later and checks their version counter when
backward runs; an in-place write in between makes backward raise
`RuntimeError: one of the variables needed for gradient computation has been modified by an
inplace operation: [...], which is output 0 of <Op>, is at version N; expected version M
instead.` (PYTORCH_FACTS 2e). Which ops save their *output* was checked op by op on torch 2.13:
sigmoid, tanh, exp, expm1, softmax, log_softmax, sqrt, rsqrt, reciprocal, relu, leaky_relu and
elu do; log, gelu, sin, relu6/hardtanh, silu and hardswish (in-place or not) do not.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator

from gradtrace.findings import Finding, Related
from gradtrace.lint.context import FUNCTION_TYPES, Context
from gradtrace.lint.flow import DETACHED, GRAPH, LEAF, NUMBER, NUMPY, OPTIMIZER
from gradtrace.lint.names import dotted
from gradtrace.lint.rule import Bad, Good, Rule
from gradtrace.lint.rules.grad_mode._deps import backward_sinks, is_inference_function, sink_loss

UNDECIDABLE: list[tuple[str, str]] = [
    ("an in-place write through an alias or a view made elsewhere (`y = p.view(-1); y[0] = 0`, "
     "a tensor returned by another function)",
     "which tensors share storage and version counter is only known at runtime; see runtime: "
     "gradtrace run"),
    ("`optimizer.step()` between backward passes whose graphs are built in different functions",
     "whether the graphs share the stepped parameters depends on the call path; see runtime: "
     "gradtrace run"),
    ("an in-place write into a saved output when the input may not require grad",
     "only raises when autograd recorded the op; see runtime: gradtrace run"),
]

SAVED_OUT = {  # op -> family ("sig": GT602 for any write, "relu": GT603 for +=, GT602 else)
    "sigmoid": "sig", "tanh": "sig", "exp": "sig", "expm1": "sig", "softmax": "sig",
    "log_softmax": "sig", "sqrt": "sig", "rsqrt": "sig", "reciprocal": "sig", "expit": "sig",
    "sigmoid_": "sig", "tanh_": "sig", "exp_": "sig", "sqrt_": "sig",
    "relu": "relu", "relu_": "relu", "leaky_relu": "relu", "leaky_relu_": "relu",
    "elu": "relu", "elu_": "relu",
}
SAVED_MODULES = {"torch.nn.Sigmoid": "sigmoid", "torch.nn.Tanh": "tanh",
                 "torch.nn.Softmax": "softmax", "torch.nn.LogSoftmax": "log_softmax",
                 "torch.nn.ReLU": "relu", "torch.nn.LeakyReLU": "leaky_relu",
                 "torch.nn.ELU": "elu"}
VIEW_METHODS = frozenset({"view", "view_as", "squeeze", "unsqueeze", "permute", "transpose",
                          "t", "flatten", "unflatten", "narrow", "select", "expand"})
NOT_WRITES = frozenset({"requires_grad_", "share_memory_", "retain_grad", "record_stream"})
ARITH_WRITES = frozenset({"add_", "sub_", "mul_", "div_"})
OP_WORDS = re.compile(r"sigmoid|softmax|tanh|exp|relu|elu|sqrt|reciprocal")
MODULE_WORDS = re.compile(r"ReLU|Sigmoid|Tanh|Softmax|ELU")
TRAINING_FUNCS = frozenset({"forward"})


@dataclass(frozen=True)
class Producer:
    """The op whose saved output a name holds: its call and a display name."""

    call: ast.AST
    op: str
    family: str


class _LazyModules:
    """``self.<attr>`` -> op of activation modules in a class, computed on first lookup."""

    def __init__(self, cls: ast.ClassDef | None, ctx: Context) -> None:
        self.cls, self.ctx = cls, ctx
        self._map: dict[str, str] | None = None
        self._inplace: set[str] = set()

    def inplace(self, name: str | None) -> bool:
        """Whether ``self.<name>`` is an activation module built with ``inplace=True``."""
        return bool(self.get(name)) and (name or "") in self._inplace

    def any(self) -> bool:
        if self._map is None:
            self._map = _module_attrs(self.cls, self.ctx, self._inplace)
        return bool(self._map)

    def get(self, name: str | None) -> str | None:
        if not name or not name.startswith("self."):
            return None
        if self._map is None:
            self._map = _module_attrs(self.cls, self.ctx, self._inplace)
        return self._map.get(name)


def _module_attrs(cls: ast.ClassDef | None, ctx: Context, inplace: set[str]) -> dict[str, str]:
    """``self.<attr>`` -> saved-output op for activation modules assigned in the class."""
    out: dict[str, str] = {}
    if cls is None or not MODULE_WORDS.search(
            "\n".join(ctx.lines[cls.lineno - 1:cls.end_lineno])):
        return out
    for fn in cls.body:
        if not isinstance(fn, FUNCTION_TYPES) or fn.name != "__init__":
            continue
        for n in _statements(fn.body):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) \
                    and MODULE_WORDS.search(ctx.line_text(n.lineno)):
                op = SAVED_MODULES.get(ctx.qualified_name(n.value.func) or "")
                flag = any(k.arg == "inplace" and isinstance(k.value, ast.Constant)
                           and k.value.value is True for k in n.value.keywords) or (
                    n.value.args and isinstance(n.value.args[-1], ast.Constant)
                    and n.value.args[-1].value is True)
                for t in n.targets:
                    name = dotted(t)
                    if op and name and name.startswith("self."):
                        out[name] = op
                        if flag:
                            inplace.add(name)
    return out


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body, nested blocks included, nested defs excluded."""
    for s in body:
        yield s
        if isinstance(s, (*FUNCTION_TYPES, ast.ClassDef)):
            continue
        for f in ("body", "orelse", "finalbody"):
            sub = getattr(s, f, None)
            if sub:
                yield from _statements(sub)
        for h in getattr(s, "handlers", ()):
            yield from _statements(h.body)


def _op_of_call(call: ast.AST, ctx: Context, modules: _LazyModules) -> str | None:
    """The saved-output op a call applies (through views), or None."""
    while isinstance(call, (ast.Call, ast.Subscript)):
        if isinstance(call, ast.Subscript):
            call = call.value
            continue
        f = call.func
        q = ctx.qualified_name(f) or ""
        last = q.rpartition(".")[2]
        if (q.startswith(("torch.", "torch.nn.functional.", "torch.special."))
                and last in SAVED_OUT):
            return last
        if isinstance(f, ast.Attribute):
            if f.attr in SAVED_OUT and not q.startswith("torch.") and \
                    not (dotted(f) or "").startswith("self."):
                return f.attr  # tensor method: x.sigmoid()
            if f.attr in VIEW_METHODS:
                call = f.value
                continue
        return modules.get(dotted(f))
    return None


def _producer(name: str, line: int, ctx: Context, modules: _LazyModules) -> Producer | None:
    scope = ctx.scope()
    b = scope.binding_before(name, line)
    if b is None or b.value is None or isinstance(b.stmt, ast.AugAssign):
        return None
    if scope.grad_off_at(b.stmt) is not None:
        return None
    op = _op_of_call(b.value, ctx, modules)
    if op is None:
        return None
    args = [a for a in getattr(_innermost_call(b.value), "args", [])]
    if args and all(scope.kind(a) in (LEAF, NUMBER, NUMPY, DETACHED) for a in args[:1]):
        return None
    return Producer(b.value, op.rstrip("_"), SAVED_OUT.get(op, "relu"))


def _innermost_call(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.Subscript) or (isinstance(e, ast.Call) and isinstance(
            e.func, ast.Attribute) and e.func.attr in VIEW_METHODS):
        e = e.value if isinstance(e, ast.Subscript) else e.func.value  # type: ignore[attr-defined]
    return e


def _write_target(stmt: ast.stmt, ctx: Context,
                  modules: _LazyModules) -> tuple[str, str, ast.AST] | None:
    """(name, kind of write, node) for an in-place write statement: ``p[m] = v`` ("index"),
    ``p += v`` ("aug"), ``p.mul_(v)`` ("arith"/"method"), ``F.relu(p, inplace=True)``,
    ``torch.relu_(p)``, ``self.relu(p)`` with an in-place ReLU ("method")."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0], ast.Subscript):
        name = dotted(stmt.targets[0].value)
        return (name, "index", stmt.targets[0]) if name else None
    if isinstance(stmt, ast.AugAssign):
        t = stmt.target
        if isinstance(t, ast.Subscript):
            name = dotted(t.value)
            return (name, "index", t) if name else None
        name = dotted(t)
        return (name, "aug", t) if name else None
    call = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(stmt, ast.Expr) and isinstance(f, ast.Attribute) and f.attr.endswith("_") \
            and not f.attr.startswith("_") and f.attr not in NOT_WRITES:
        name = dotted(f.value)
        return (name, "arith" if f.attr in ARITH_WRITES else "method", call) if name else None
    if call.args and _inplace_call(call, ctx, modules):
        name = dotted(call.args[0])
        return (name, "method", call) if name else None
    return None


def _written_name(stmt: ast.stmt) -> str | None:
    """The name a statement may write in place, from its shape alone (cheap pre-check)."""
    if isinstance(stmt, ast.AugAssign):
        t = stmt.target
        return dotted(t.value if isinstance(t, ast.Subscript) else t)
    if isinstance(stmt, ast.Assign):
        if len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
            return dotted(stmt.targets[0].value)
        call = stmt.value
    elif isinstance(stmt, ast.Expr):
        call = stmt.value
    else:
        return None
    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(stmt, ast.Expr) and isinstance(f, ast.Attribute) and f.attr.endswith("_"):
        return dotted(f.value)
    if call.args and (call.keywords or isinstance(f, ast.Attribute) and (
            f.attr.endswith("_") or isinstance(f.value, ast.Name) and f.value.id == "self")):
        return dotted(call.args[0])
    return None


def _inplace_call(call: ast.Call, ctx: Context, modules: _LazyModules) -> bool:
    if any(k.arg == "inplace" and isinstance(k.value, ast.Constant) and k.value.value is True
           for k in call.keywords):
        return True
    q = ctx.qualified_name(call.func) or ""
    if q.startswith("torch.") and q.endswith("_") and not q.endswith("__"):
        return True
    return modules.inplace(dotted(call.func))


def _in_training(ctx: Context, stmt: ast.stmt) -> ast.Call | bool:
    """A backward call after ``stmt`` in this function, or True for a module's forward."""
    fn = ctx.function
    if fn is None or is_inference_function(fn, ctx):
        return False
    for sink in backward_sinks(ctx.scope()):
        if sink.call.lineno > stmt.end_lineno:  # type: ignore[operator]
            return sink.call
    cls = ctx.class_def
    if fn.name in TRAINING_FUNCS and cls is not None and not _eval_branch(ctx) \
            and not _is_autograd_function(cls, fn, ctx):
        return True
    return False


def _is_autograd_function(cls: ast.ClassDef, fn: ast.AST, ctx: Context) -> bool:
    """``forward`` of a ``torch.autograd.Function``: it runs with grad disabled."""
    if any(dotted(d) == "staticmethod" for d in getattr(fn, "decorator_list", ())):
        return True
    return any((ctx.qualified_name(b) or "").endswith("Function") for b in cls.bases)


def _eval_branch(ctx: Context) -> bool:
    """Inside ``if not self.training:`` / the ``else`` of ``if self.training:``."""
    for s, inner in zip(ctx.stmts, ctx.stmts[1:]):
        if isinstance(s, ast.If) and "training" in ast.dump(s.test):
            negated = isinstance(s.test, ast.UnaryOp) and isinstance(s.test.op, ast.Not)
            if negated == (inner in s.body):
                return True
    return False


class _InplaceRule(Rule):
    triggers = ("sigmoid", "softmax", "tanh", "exp", "relu", "elu", "sqrt", "reciprocal",
                "Sigmoid", "Softmax", "Tanh", "ReLU", "ELU")

    def _candidates(self, fn: ast.AST, ctx: Context, modules: _LazyModules) -> set[str]:
        """Names this function assigns from a saved-output op (cheap pre-check, cached)."""
        cache: dict[int, set[str]] = self.__dict__.setdefault("_cands", {})
        names = cache.get(id(fn))
        if names is None:
            names = cache[id(fn)] = set()
            for n in _statements(fn.body):  # type: ignore[attr-defined]
                if not isinstance(n, ast.Assign) or not isinstance(n.value, (ast.Call,
                                                                               ast.Subscript)):
                    continue
                text = ctx.line_text(n.lineno)
                if not OP_WORDS.search(text) and not ("self." in text and modules.any()):
                    continue
                if _op_of_call(n.value, ctx, modules) is not None:
                    names.update(d for t in n.targets if (d := dotted(t)))
        return names

    def _find(self, node: ast.stmt, ctx: Context) -> tuple[Producer, str, ast.AST,
                                                              ast.Call | bool] | None:
        cheap = _written_name(node)
        fn = ctx.function if cheap is not None else None
        if fn is None:
            return None
        modules = self.__dict__.setdefault("_mods", {})
        cls = ctx.class_def
        if id(cls) not in modules:
            modules[id(cls)] = _LazyModules(cls, ctx)
        if cheap not in self._candidates(fn, ctx, modules[id(cls)]):
            return None
        w = _write_target(node, ctx, modules[id(cls)])
        if w is None:
            return None
        name, kind, target = w
        prod = _producer(name, node.lineno, ctx, modules[id(cls)])
        if prod is None:
            return None
        training = _in_training(ctx, node)
        if not training:
            return None
        return prod, kind, target, training

    def _related(self, prod: Producer, training: ast.Call | bool, ctx: Context) -> list[Related]:
        rel = [Related(ctx.path, prod.call.lineno,  # type: ignore[attr-defined]
                       f"`{prod.op}` saves its output for backward here",
                       ctx.column(prod.call))]
        if isinstance(training, ast.Call):
            rel.append(Related(ctx.path, training.lineno,
                               f"`{ctx.source(training)}` raises 'one of the variables needed "
                               "for gradient computation has been modified by an inplace "
                               "operation' here", ctx.column(training)))
        return rel


class InplaceWriteToSavedOutput(_InplaceRule):
    """An in-place or index/masked write into the output of sigmoid/softmax/tanh/exp/... before backward.

    Why: these ops save their *output* to compute their gradient (sigmoid' = y(1-y),
    softmax, tanh, exp, sqrt, relu ...). Writing into that output in place (`p[mask] = 0`,
    `p.clamp_(...)`, `p += 1`, an in-place ReLU on it) bumps its version counter and the next
    backward raises `RuntimeError: one of the variables needed for gradient computation has been
    modified by an inplace operation: [...], which is output 0 of Sigmoid, ...`
    (PYTORCH_FACTS 2e; checked op by op on torch 2.13, also when the write is under
    `no_grad`). Use the out-of-place form: `p = p.masked_fill(mask, 0)`, `p = p.clamp(...)`,
    or write into a `.clone()`.
    Known limits: a write in a module's `forward` is reported when not in an eval-only branch;
    writes through another name (an alias) are not followed.
    """

    code = "GT602"
    name = "inplace-write-to-saved-output"
    message = "this in-place write changes `{name}`, the output of `{op}` that backward needs"
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
        Good("""
            import torch

            @torch.no_grad()
            def predict(model, x):
                scores = model(x).sigmoid()
                scores[scores < 0.5] = 0
                return scores
            """),
    ]

    def visit_Assign(self, node: ast.Assign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.stmt, ctx: Context) -> Iterator[Finding]:
        found = self._find(node, ctx)
        if found is None:
            return
        prod, kind, target, training = found
        if prod.family == "relu" and kind in ("aug", "arith"):
            return  # GT603
        name = ctx.source(target.value if isinstance(target, ast.Subscript) else target)
        if isinstance(target, ast.Call):
            name = ctx.source(target.func.value)  # type: ignore[attr-defined]
        yield self.report(node, ctx, related=self._related(prod, training, ctx), name=name,
                          op=prod.op)


class InplaceAddToReluOutput(_InplaceRule):
    """`out += identity` (or `out.add_(...)`) right after `out = relu(out)`: backward needs relu's output.

    Why: ReLU (in-place or not), LeakyReLU and ELU compute their gradient from their *output*,
    so they save it. `out += identity` writes into that saved output and backward raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation: [...], which is output 0 of ReluBackward0 ...` (PYTORCH_FACTS 2e,
    checked on torch 2.13). A residual block adds the identity *before* the ReLU
    (`out = self.bn2(out); out += identity; out = self.relu(out)`), or uses `out = out +
    identity`. ReLU6/Hardtanh, SiLU and Hardswish do not save their output and are not reported.
    Known limits: `self.relu` must be assigned an activation module in the same class.
    """

    code = "GT603"
    name = "inplace-add-to-relu-output"
    message = ("`{stmt}` writes in place into `{name}`, the output of `{op}` (line {line}) "
               "that backward needs")
    fix_title = "Add out of place"
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
        Good("""
            import torch.nn.functional as F

            def forward(self, x):
                out = F.relu6(self.conv(x), inplace=True)
                out += x
                return out
            """),
    ]

    def visit_AugAssign(self, node: ast.AugAssign, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def visit_Expr(self, node: ast.Expr, ctx: Context) -> Iterator[Finding]:
        yield from self._check(node, ctx)

    def _check(self, node: ast.stmt, ctx: Context) -> Iterator[Finding]:
        found = self._find(node, ctx)
        if found is None:
            return
        prod, kind, target, training = found
        if prod.family != "relu" or kind not in ("aug", "arith"):
            return
        fix = None
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}.get(type(node.op))
            if op:
                name = node.target.id
                fix = self.fix(ctx.edit(node, f"{name} = {name} {op} {_paren(node.value, ctx)}"))
        name = ctx.source(target) if not isinstance(target, ast.Call) \
            else ctx.source(target.func.value)  # type: ignore[attr-defined]
        yield self.report(node, ctx, related=self._related(prod, training, ctx), fix=fix,
                          stmt=ctx.source(node), name=name, op=prod.op, line=prod.call.lineno)  # type: ignore[attr-defined]


def _paren(e: ast.expr, ctx: Context) -> str:
    src = ctx.source(e)
    simple = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)
    return src if isinstance(e, simple) else f"({src})"


class OptimizerStepBetweenBackwards(Rule):
    """`optimizer.step()` runs between two backward passes through one graph.

    Why: `step()` updates the parameters in place. A graph built before the step saved those
    parameters (a matmul saves its weight), so a second `backward()` through it — kept alive
    with `retain_graph=True` — finds them at a newer version and raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation: [...], which is output 0 of AsStrided, ...` (PYTORCH_FACTS 2e, e4).
    Do all backward passes first, then step (or sum the losses); in a GAN recompute
    `D(fake)` after the discriminator step. `retain_graph=True` with the step *after* the last
    backward is fine.
    Known limits: the second loss must be built before the step in the same function (or
    before the loop whose body steps). Backward only raises when the old graph saved a stepped
    parameter: true of any model with two layers, not of a single `nn.Linear` on raw input
    (checked on torch 2.13); the runtime (`gradtrace run`) sees which case it is.
    """

    code = "GT601"
    name = "optimizer-step-between-backwards"
    message = ("`{step}` updates parameters in place between `{first}` (line {first_line}) and "
               "`{second}` (line {second_line}), whose graph was built before the step")
    triggers = ("step",)
    examples = [
        Bad("""
            def train_step(model, x, opt):
                out = model(x)
                loss_a = out.sum()
                loss_b = out.pow(2).sum()
                loss_a.backward(retain_graph=True)
                opt.step()
                loss_b.backward()
            """, at=(6, 4)),
        Bad("""
            def fit(encoder, head, x, y, opt, criterion):
                feats = encoder(x)
                for epoch in range(10):
                    loss = criterion(head(feats), y)
                    loss.backward(retain_graph=True)
                    opt.step()
                    opt.zero_grad()
            """, at=(6, 8)),
        Good("""
            def train_step(model, x, opt):
                out = model(x)
                loss_a = out.sum()
                loss_b = out.pow(2).sum()
                loss_a.backward(retain_graph=True)
                loss_b.backward()
                opt.step()
            """),
        Good("""
            def gan_step(G, D, z, real, opt_d, opt_g, bce):
                fake = G(z)
                d_loss = bce(D(real), 1) + bce(D(fake), 0)
                d_loss.backward(retain_graph=True)
                opt_d.step()
                g_loss = bce(D(fake), 1)
                g_loss.backward()
                opt_g.step()
            """),
    ]

    def visit_Call(self, node: ast.Call, ctx: Context) -> Iterator[Finding]:
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr == "step") or node.args or node.keywords:
            return
        if "retain_graph" not in ctx.text or ctx.function is None:
            return
        scope = ctx.scope()
        recv = dotted(f.value) or ""
        if scope.kind(f.value) != OPTIMIZER and "opt" not in recv.rpartition(".")[2].lower():
            return
        sinks = backward_sinks(scope)
        retained = [s for s in sinks if s.call.lineno < node.lineno and _retains(s.call)]
        if not retained:
            return
        loops = scope.loops_of(node)
        for later in sinks:
            hit = self._second(later, node, retained, loops, scope)
            if hit is not None:
                first = hit
                yield self.report(node, ctx, related=(
                    Related(ctx.path, first.call.lineno, "the graph is kept alive here",
                            ctx.column(first.call)),
                    Related(ctx.path, later.call.lineno, f"`{ctx.source(later.call)}` raises "
                            "'... modified by an inplace operation' here",
                            ctx.column(later.call))),
                    step=ctx.source(node), first=ctx.source(first.call),
                    first_line=first.call.lineno, second=ctx.source(later.call),
                    second_line=later.call.lineno)
                return

    @staticmethod
    def _second(later, step: ast.Call, retained, loops, scope):  # type: ignore[no-untyped-def]
        name = dotted(later.loss)
        if name is None:
            return None
        if later.call.lineno > step.lineno:
            b = scope.binding_before(name, later.call.lineno)
            if b is not None and b.line < step.lineno and retained[-1].call is not later.call:
                return retained[-1]
            return None
        # a retained backward in the loop that steps: the next iteration reuses an old graph
        if later.call.lineno < step.lineno and _retains(later.call) and loops:
            loop = loops[-1]
            if loop not in scope.loops_of(later.call):
                return None
            b = scope.binding_before(name, later.call.lineno)
            if b is not None and b.line < loop.lineno:
                return later
            if b is not None and b.value is not None and _stale_graph_input(b, loop, scope):
                return later
        return None


def _retains(call: ast.Call) -> bool:
    return any(k.arg == "retain_graph" and isinstance(k.value, ast.Constant)
               and k.value.value is True for k in call.keywords)


def _stale_graph_input(b, loop: ast.stmt, scope) -> bool:  # type: ignore[no-untyped-def]
    """Whether the loss bound inside ``loop`` uses a tensor with a graph built before the loop."""
    for n in ast.walk(b.value):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            nb = scope.binding_before(n.id, b.line)
            if nb is not None and nb.line < loop.lineno and not nb.no_grad and (
                    nb.kind == GRAPH or nb.kind is None and isinstance(nb.value, ast.Call)):
                return True
    return False
