"""Which switch on the user's stack turned grad mode off (issue 13 §2).

# NOTE [grad off on the stack]
The tracer remembers the last ``set_grad_enabled(False)`` it saw (``state.grad_off``), but that
is the line that *called* the switch: for a decorator (``@torch.no_grad()`` on a ``forward``)
torch's wrapper turns the mode off, so the line seen is the caller's, and inside an
optimizer's ``step`` (``@torch.no_grad()`` on a hand-written ``step`` that runs the closure)
switches are not recorded at all. When a module runs with grad mode off, or an op cuts the graph
under ``no_grad``, the switch is nearly always still on the stack: a ``with torch.no_grad():``
(``inference_mode()``, ``set_grad_enabled(<not True>)``) block around the running line of a
user frame, or a grad-off decorator on a user function the stack passes through. The innermost
one in user code is the cause:

- a ``with`` block: its line;
- a decorated ``forward`` (or ``__call__``), or a decorated function that itself calls
  ``backward``/``autograd.grad`` (it must compute gradients): the decorator's line;
- a decorated function whose running line calls a callable it was handed (``closure()``,
  ``fn(*args)``: the optimizer step that runs the training closure): that call;
- a decorated helper called by a ``forward`` (``self.embed(x)``): the decorator, it is part of
  the model;
- a decorated method of a training object that holds modules: the decorator
  (NOTE [grad-off method of a trainer]);
- any other decorated function (``generate``, ``select_action``: meant to run without
  gradients): the line that called it, whose result was then trained on;
- the same for a method (not ``forward``) that calls ``self.eval()`` and whose body is a
  ``with`` block around the object's own forward pass (``self.forward(x)``, ``self(x)``), then
  only ``return``: an inference entry point the class offers beside its forward (smp's
  ``predict``: eval mode and no graph), so the root is the caller that picked it where a graph
  was needed, and the fix calls the module (forward) instead. Without the ``eval()`` (an RL
  ``select_action`` under ``with torch.no_grad():``) the ``with`` line stays the cause: there
  the fix is usually to keep the graph in the method (test_cause_lines).

A ``with torch.enable_grad():`` (or its decorator) met first means the mode was turned off
again below it by a call that has returned: None, and the caller keeps ``state.grad_off``.
Read only on the rare path (the first grad-off run of a module, a new cut site under
``no_grad``); the answer is cached per (code object, line), the function's node per code.
"""
from __future__ import annotations

import ast
from types import CodeType, FrameType

from gradtrace.runtime.frames import Site, is_internal
from gradtrace.runtime.trace.locate import tree_of

_OFF, _ON, _CALLER = "off", "on", "caller"
_Hit = tuple[str, Site]
_AT: dict[tuple[int, int], tuple[CodeType, _Hit | None]] = {}
_NODE: dict[int, tuple[CodeType, ast.AST | None]] = {}
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _switch(expr: ast.AST) -> str | None:
    """``_OFF``/``_ON`` for a grad-mode switch expression (a context manager or decorator)."""
    call = expr if isinstance(expr, ast.Call) else None
    f = call.func if call is not None else expr
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if name not in ("no_grad", "inference_mode", "enable_grad", "set_grad_enabled"):
        return None
    args = [*call.args, *(k.value for k in call.keywords if k.arg == "mode")] if call else []
    flag = args[0].value if args and isinstance(args[0], ast.Constant) else None
    if name == "enable_grad" or (name == "set_grad_enabled" and flag is True):
        return _ON
    if name == "inference_mode" and flag is False:
        return None  # inference_mode(False): no switch
    return _OFF  # set_grad_enabled(<flag>) while grad mode is off: it turned it off


def _node(code: CodeType) -> ast.AST | None:
    hit = _NODE.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    tree = tree_of(code.co_filename)
    found: ast.AST | None = tree if code.co_name == "<module>" else None
    for n in ast.walk(tree) if tree is not None and found is None else ():
        if isinstance(n, _FUNCS) and n.name == code.co_name and min(
                [n.lineno, *(d.lineno for d in n.decorator_list)]) == code.co_firstlineno:
            found = n
            break
    if len(_NODE) > 4096:
        _NODE.clear()
    _NODE[id(code)] = (code, found)
    return found


def _own(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``node``'s own scope (nested functions, classes and lambdas left out)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(node))
    while todo:
        n = todo.pop()
        if isinstance(n, _SCOPES):
            out.extend(getattr(n, "decorator_list", ()))
            continue
        out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _computes_gradients(own: list[ast.AST]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
               and (getattr(n.func, "attr", None) or getattr(n.func, "id", None))
               in ("backward", "grad") for n in own)


def _evaluates_self(n: ast.AST) -> bool:
    """``self.eval()`` or ``self.train(False)``."""
    if not isinstance(n, ast.Call):
        return False
    f, args = n.func, n.args
    return isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) \
        and f.value.id == "self" and (f.attr == "eval" or (
            f.attr == "train" and bool(args) and isinstance(args[0], ast.Constant)
            and args[0].value is False))


def _wraps_own_forward(node: ast.AST, block: ast.With | ast.AsyncWith) -> bool:
    """Whether ``block`` is a method's no-grad body around the object's own forward pass
    (NOTE [grad off on the stack], last case): a method other than ``forward``/``__call__``
    that puts the module in eval mode and whose top-level ``with`` calls ``self.forward(...)``
    or ``self(...)``, followed by nothing but ``return``, and computes no gradients itself."""
    if not isinstance(node, _FUNCS) or node.name in ("forward", "__call__") \
            or block not in node.body or not node.args.args or node.args.args[0].arg != "self":
        return False
    after = node.body[node.body.index(block) + 1:]
    if not all(isinstance(s, ast.Return) for s in after):
        return False
    inner = [n for s in block.body for n in [s, *_own(s)]]
    if _computes_gradients(inner) or not any(_evaluates_self(n) for n in _own(node)):
        return False
    return any(isinstance(n, ast.Call) and (
        (isinstance(n.func, ast.Name) and n.func.id == "self")
        or (isinstance(n.func, ast.Attribute) and n.func.attr == "forward"
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"))
        for n in inner)


def _at(code: CodeType, line: int) -> _Hit | None:
    node = _node(code)
    if node is None:
        return None
    path, name = code.co_filename, code.co_name
    own = _own(node)
    best: ast.With | None = None
    for n in own:
        if isinstance(n, (ast.With, ast.AsyncWith)) and n.body \
                and n.body[0].lineno <= line <= (n.end_lineno or n.lineno) \
                and any(_switch(i.context_expr) for i in n.items) \
                and (best is None or n.lineno > best.lineno):
            best = n
    if best is not None:
        kinds = [k for i in best.items for k in [_switch(i.context_expr)] if k]
        if kinds[-1] == _OFF and _wraps_own_forward(node, best):
            return (_CALLER, Site(path, best.lineno, name, best.col_offset))
        return (kinds[-1], Site(path, best.lineno, name, best.col_offset))
    if not isinstance(node, _FUNCS):
        return None
    deco = next(((d, k) for d in node.decorator_list for k in [_switch(d)] if k), None)
    if deco is None:
        return None
    here = Site(path, deco[0].lineno, name, deco[0].col_offset)
    if deco[1] == _ON or name in ("forward", "__call__") or _computes_gradients(own):
        return (deco[1], here)
    params = {a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                              node.args.vararg, node.args.kwarg) if a is not None} - {"self"}
    called = [n for n in own if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in params and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if called:
        return (_OFF, Site(path, called[0].lineno, name, called[0].col_offset))
    return (_CALLER, here)


def _user(frame: FrameType | None) -> FrameType | None:
    while frame is not None and is_internal(frame.f_code):
        frame = frame.f_back
    return frame


def off_switch(frame: FrameType | None) -> Site | None:
    """The line that turned grad mode off for the code running in ``frame`` (the innermost
    user frame, usually), read from the stack (NOTE [grad off on the stack]); None if no
    enclosing switch is found or the innermost is one that turns it on."""
    frame = _user(frame)
    while frame is not None:
        found = _hit(frame)
        if found is not None:
            kind, site = found
            if kind == _ON:
                return None
            if kind == _CALLER:
                caller = _user(frame.f_back)
                if caller is None or caller.f_code.co_name == "forward":
                    return site  # a helper of a module's forward: part of the model
                if _handed_leaf(frame):
                    return site  # NOTE [trainable leaf handed to a grad-off function]
                if _trainer_method(frame):
                    return site  # NOTE [grad-off method of a trainer]
                return Site(caller.f_code.co_filename, caller.f_lineno, caller.f_code.co_name)
            return site
        frame = _user(frame.f_back)
    return None


def _trainer_method(frame: FrameType) -> bool:
    """Whether a decorated function is a method of an object that is not a module but holds
    one (a solver, a trainer).

    # NOTE [grad-off method of a trainer]
    A grad-off decorator on a module's own method (``model.generate``) or on a plain function
    (``select_action``) marks an inference entry point: the caller that trained on its result
    is the cause. On a method of a training object (``MusicGenSolver._prepare_tokens_and_
    attributes`` runs ``self.model.condition_provider``), the method is a step of the training
    code itself, written by the same hand as the loss: the decorator is what cut the module it
    runs, and the fix removes it (audiocraft). Read from the frame's ``self`` on the rare path."""
    import torch

    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return False
    obj = frame.f_locals.get("self")
    if obj is None or isinstance(obj, torch.nn.Module):
        return False
    try:
        held = vars(obj).values()
    except TypeError:
        return False
    return any(isinstance(v, torch.nn.Module) for v in held)


def _handed_leaf(frame: FrameType) -> bool:
    """Whether a decorated function's caller handed it a trainable leaf as an argument.

    # NOTE [trainable leaf handed to a grad-off function]
    A grad-off decorated function the training code calls (``generate``, ``act(obs)``) is
    named at its call: it is meant to run without gradients, and the caller should not have
    trained on its result. When the caller hands it a leaf tensor that requires grad (a
    ``prompt_embeds`` Parameter being optimized, given to an ``encode_prompt`` that only
    reshapes it), the function is part of the trained computation: its decorator is what cuts
    the leaf, and the fix removes it (diffusers' DeepFloyd-IF pipeline). Read from the frame's
    arguments, on the rare path (a new cut site under ``no_grad``)."""
    import torch

    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    values = frame.f_locals
    for name in code.co_varnames[:n]:
        v = values.get(name)
        if isinstance(v, torch.Tensor) and v.requires_grad and v.is_leaf:
            return True
    return False


def switch_frame(frame: FrameType | None) -> tuple[FrameType, Site] | None:
    """The innermost user frame (from ``frame`` outwards) running inside a grad-off switch of
    its own (a ``with`` block around its running line, or a decorator on its function), and
    that switch; None if none is found or the innermost switch turns grad mode on."""
    frame = _user(frame)
    while frame is not None:
        found = _hit(frame)
        if found is not None:
            return None if found[0] == _ON else (frame, found[1])
        frame = _user(frame.f_back)
    return None


def _hit(frame: FrameType) -> _Hit | None:
    """The switch around ``frame``'s running line (cached per code object and line)."""
    code, line = frame.f_code, frame.f_lineno
    key = (id(code), line)
    hit = _AT.get(key)
    if hit is None or hit[0] is not code:
        if len(_AT) > 4096:
            _AT.clear()
        hit = _AT[key] = (code, _at(code, line))
    return hit[1]


function_node = _node  # the function (or module) node of a code object, cached

__all__ = ["function_node", "off_switch", "switch_frame"]
