"""Which ``torch.optim`` class an optimizer-building call makes, also when the class is
looked up by a name (``getattr(torch.optim, cfg.optimizer)(params, lr=lr, alpha=0.99,
eps=1e-8)``).

# NOTE [optimizer named by a string]
A config string picks the class, but the keyword arguments the call passes narrow it: only
the classes whose constructor takes every one of them can be built there without a
``TypeError``. ``alpha`` and ``eps`` together are RMSprop's alone (``ASGD`` takes ``alpha``,
not ``eps``). The answer is the set of those classes (torch 2.13's constructors, below);
a call with ``**kwargs`` or positional hyper-parameters after the parameters, or with no
keyword that narrows, answers every class (no knowledge).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.context import Context

# the keyword parameters of each torch.optim class's constructor (torch 2.13), after `params`
KEYWORDS: dict[str, frozenset[str]] = {name: frozenset(words.split()) for name, words in {
    "ASGD": "lr lambd alpha t0 weight_decay foreach maximize differentiable capturable",
    "Adadelta": "lr rho eps weight_decay foreach capturable maximize differentiable",
    "Adafactor": "lr beta2_decay eps d weight_decay foreach maximize",
    "Adagrad": "lr lr_decay weight_decay initial_accumulator_value eps foreach maximize "
               "differentiable fused",
    "Adam": "lr betas eps weight_decay amsgrad foreach maximize capturable differentiable "
            "fused decoupled_weight_decay",
    "AdamW": "lr betas eps weight_decay amsgrad maximize foreach capturable differentiable "
             "fused",
    "Adamax": "lr betas eps weight_decay foreach maximize differentiable capturable",
    "LBFGS": "lr max_iter max_eval tolerance_grad tolerance_change history_size "
             "line_search_fn",
    "Muon": "lr weight_decay momentum nesterov ns_coefficients eps ns_steps adjust_lr_fn",
    "NAdam": "lr betas eps weight_decay momentum_decay decoupled_weight_decay foreach "
             "maximize capturable differentiable",
    "RAdam": "lr betas eps weight_decay decoupled_weight_decay foreach maximize capturable "
             "differentiable",
    "RMSprop": "lr alpha eps weight_decay momentum centered capturable foreach maximize "
               "differentiable",
    "Rprop": "lr etas step_sizes capturable foreach maximize differentiable",
    "SGD": "lr momentum dampening weight_decay nesterov maximize foreach differentiable fused",
    "SparseAdam": "lr betas eps maximize",
}.items()}


def optimizer_classes(call: ast.AST, ctx: Context) -> frozenset[str] | None:
    """The ``torch.optim`` classes ``call`` may build: one for ``torch.optim.Adam(...)``,
    those that take every keyword given for ``getattr(torch.optim, name)(...)``
    (NOTE [optimizer named by a string]); None when it builds none of them or cannot be told."""
    if not isinstance(call, ast.Call):
        return None
    q = ctx.qualified_name(call.func) or ""
    last = q.rpartition(".")[2]
    if q == "torch.optim." + last and last in KEYWORDS:
        return frozenset({last})
    f = call.func
    if not (isinstance(f, ast.Call) and isinstance(f.func, ast.Name) and f.func.id == "getattr"
            and len(f.args) == 2 and ctx.qualified_name(f.args[0]) == "torch.optim"):
        return None
    if len(call.args) > 1 or any(k.arg is None for k in call.keywords):
        return None
    given = {k.arg for k in call.keywords} - {"lr", "weight_decay", "maximize", "foreach",
                                              "differentiable", "capturable"}
    if not given:
        return None
    found = frozenset(n for n, words in KEYWORDS.items() if given <= words)
    return found or None


def optimizer_tables(ctx: Context) -> frozenset[str]:
    """Module-level names bound once to a dict literal every value of which is a
    ``torch.optim`` class: a registry (``OPTIMIZERS = {"sgd": torch.optim.SGD, "adam":
    torch.optim.Adam}``), so ``OPTIMIZERS[cfg["type"]](model.parameters(), lr=lr)`` builds an
    optimizer whichever key the config picks."""
    return ctx.memo("optimizer-tables", ctx.tree, lambda: _tables(ctx))


def _tables(ctx: Context) -> frozenset[str]:
    count: dict[str, int] = {}
    found: set[str] = set()
    for s in ctx.tree.body:  # type: ignore[attr-defined]
        targets = s.targets if isinstance(s, ast.Assign) else [s.target] if isinstance(
            s, ast.AnnAssign) else []
        for t in targets:
            if isinstance(t, ast.Name):
                count[t.id] = count.get(t.id, 0) + 1
                v = s.value
                if len(targets) == 1 and isinstance(v, ast.Dict) and v.values and all(
                        k is not None for k in v.keys) and all(
                        _optim_class(x, ctx) for x in v.values):
                    found.add(t.id)
    return frozenset(n for n in found if count[n] == 1)


def _optim_class(e: ast.expr, ctx: Context) -> bool:
    q = ctx.qualified_name(e) or ""
    last = q.rpartition(".")[2]
    return q == "torch.optim." + last and last[:1].isupper() and last != "Optimizer"


def is_optimizer_call(node: ast.AST, ctx: Context) -> bool:
    """``torch.optim.<Class>(...)`` (also through an alias or ``partial`` the import table
    resolves), or a call of a registry of optimizer classes (:func:`optimizer_tables`)."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name):
        return node.func.value.id in optimizer_tables(ctx)  # `OPTIMIZERS[name](params)`
    q = ctx.call_name(node) or ""
    last = q.rpartition(".")[2]
    return q.startswith("torch.optim.") and last[:1].isupper() and q.count(".") == 2 \
        and last not in ("Optimizer",)
