"""Objects a function itself handles as modules: it calls ``nn.Module`` API on them.

# NOTE [module receivers]
``loss = Speaker_Loss(args, n)`` (an ``nn.Module`` of another file holding a linear probe),
``opt = Adam(loss.parameters())``, then in the training function ``loss.zero_grad()`` and
``total, acc = loss.get_loss(x, z, c)`` with ``z, c`` computed under ``no_grad``: the loss
method runs the object's own layers, so the loss has a graph through its parameters (a linear
probe on frozen features, CPC's speaker evaluation). A method called on a name the same
function zero-grads, switches between train and eval, or reads the parameters, modules or
state of (``nn.Module`` API no tensor has) runs an object that holds parameters: its result
may carry a graph whatever its arguments. ``self`` is left to the file's own helpers, and a
receiver the function never handles that way keeps the loss a function of its arguments.

The same evidence types a dotted receiver: ``model.resnet.requires_grad = False`` in a script
that also loops over ``model.resnet.parameters()`` sets a plain attribute on a module (its
class built in another file, GT407). There only the methods that no optimizer, tensor or
trainer object has count (``strict``): ``parameters``, ``named_parameters``, ``modules``,
``named_modules``, ``children`` (not ``requires_grad_``: a tensor has it too).
"""
from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gradtrace.lint.flow import Scope

# nn.Module methods no tensor has (an optimizer shares zero_grad and the state_dict pair; no
# optimizer is the receiver of a loss method). `requires_grad_` is not one: a tensor has it
# too (`p.requires_grad_(False)` in a loop over `named_parameters()` freezes a parameter).
MODULE_ONLY = ("zero_grad", "train", "eval", "parameters", "named_parameters", "modules",
               "named_modules", "children", "state_dict", "load_state_dict")


STRICT = ("parameters", "named_parameters", "modules", "named_modules", "children")


def handled_as_module(scope: Scope, receiver: str, strict: bool = False,
                      at: ast.stmt | None = None) -> bool:
    """Whether the function of ``scope`` calls ``nn.Module`` API on ``receiver`` (a plain
    name, not ``self``; with ``strict``, a dotted one and only :data:`STRICT` methods; see
    NOTE [module receivers]); a call in an arm exclusive with ``at`` does not count
    (``if isinstance(x, nn.Parameter): x.requires_grad = True`` / ``else: x.parameters()``)."""
    if receiver == "self" or not strict and not receiver.isidentifier():
        return False
    methods = STRICT if strict else MODULE_ONLY
    return any(m.receiver == receiver and (at is None or not scope.exclusive(at, m.stmt))
               for method in methods for m in scope.calls_to(method))
