"""The mutation operators added in session 46: the cut moved one call away from the step.

M1-M23 put their bug in the training step itself. These move the model output the loss
reads (the statement M11/M15 rewrite, ``out = <call>(args)``) into a helper the step calls,
and put the cut there: what recall45's and recall46's facts read (a helper one call away).

    M24 cut in a helper function   ``def forward_once(net, a0, ...): return net(a0, ...).detach()``
                                   at module level, the step calls it       GT107|GT105|GT109
    M25 helper under no_grad       the same helper decorated ``@torch.no_grad()``, no detach
                                                                            GT201|GT202
    M26 cut in a method            the step is a method: ``def forward_once(self, ...)`` added
                                   to its class (``self.<x>`` called directly), the step calls
                                   ``self.forward_once(...)``              GT107|GT105|GT109
    M27 method under no_grad       M26's method decorated ``@torch.no_grad()``  GT201|GT202
    M28 grad left off by a helper  ``def settle(): torch.set_grad_enabled(False)`` at module
                                   level, called first in the step (M7 one call away) GT203
    M29 grad left off by an object ``class Settler:`` whose ``apply`` leaves grad off, called
                                   first in the step as ``Settler().apply()``        GT203

Each yields ``(kind, expected codes "A|B", function, source, lines)`` as ``mutation_ops29``.
"""

import ast

_DETACH = "GT107|GT105|GT109"
_NO_GRAD = "GT201|GT202"


def _ind(line):
    return line[: len(line) - len(line.lstrip())]


def _free_name(src, base="forward_once"):
    name, i = base, 1
    while name in src:
        i += 1
        name = f"{base}{i}"
    return name


def _top_statement(tree, f):
    for st in tree.body:
        if st.lineno <= f.lineno <= st.end_lineno:
            return st
    return None


def _dotted(e):
    """``net``, ``self.net``, ``self.nets.head``: a callee named by a path of attributes."""
    while isinstance(e, ast.Attribute):
        e = e.value
    return isinstance(e, ast.Name)


def _first_line(node):
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def away_ops(src, lines, pm, tree, f, out_assign):
    """M24-M29 on the step ``f`` whose loss reads ``out_assign`` (one line, ``x = call``)."""
    if out_assign is None or "import torch" not in src:
        return
    call = out_assign.value
    line = lines[out_assign.lineno - 1]
    if (
        not isinstance(call, ast.Call)
        or not _dotted(call.func)
        or any(isinstance(a, ast.Starred) for a in call.args)
        or any(k.arg is None for k in call.keywords)
        or not line.isascii()
        or out_assign.lineno != out_assign.end_lineno
    ):
        return
    name = _free_name(src)
    params = [f"a{i}" for i in range(len(call.args))] + [k.arg for k in call.keywords]
    inner_args = ", ".join(
        [f"a{i}" for i in range(len(call.args))] + [f"{k.arg}={k.arg}" for k in call.keywords]
    )
    outer_args = [ast.unparse(a) for a in call.args] + [
        f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords
    ]
    func = ast.unparse(call.func)

    def rewrite(at, block, callee_text, extra_lines):
        """The source with ``block`` inserted before line ``at`` and the call replaced."""
        L = lines[:]
        new = f"{line[:call.col_offset]}{callee_text}{line[call.end_col_offset:]}"
        L[out_assign.lineno - 1] = new
        L[at - 1:at - 1] = block
        return "\n".join(L), {out_assign.lineno + extra_lines}

    # M24 / M25: a helper function of the module
    top = _top_statement(tree, f)
    if top is not None:
        at = _first_line(top)
        sig = ", ".join(["net"] + params)
        for kind, want, deco, body in (
            ("M24-cut-in-helper", _DETACH, [], f"net({inner_args}).detach()"),
            ("M25-helper-under-no-grad", _NO_GRAD, ["@torch.no_grad()"], f"net({inner_args})"),
        ):
            block = deco + [f"def {name}({sig}):", f"    return {body}", "", ""]
            text = f"{name}({', '.join([func] + outer_args)})"
            s, ls = rewrite(at, block, text, len(block))
            yield kind, want, f.name, s, ls
    # M26 / M27: a method of the step's class
    cls = pm.get(id(f))
    args = f.args.args
    if isinstance(cls, ast.ClassDef) and args and args[0].arg == "self":
        at = _first_line(f)
        ind = _ind(lines[f.lineno - 1])
        if func.startswith("self."):
            sig, target, pass_net = ", ".join(["self"] + params), func, []
        else:
            sig, target, pass_net = ", ".join(["self", "net"] + params), "net", [func]
        for kind, want, deco, body in (
            ("M26-cut-in-method", _DETACH, [], f"{target}({inner_args}).detach()"),
            ("M27-method-under-no-grad", _NO_GRAD, ["@torch.no_grad()"],
             f"{target}({inner_args})"),
        ):
            block = [ind + d for d in deco] + [
                f"{ind}def {name}({sig}):", f"{ind}    return {body}", "",
            ]
            text = f"self.{name}({', '.join(pass_net + outer_args)})"
            s, ls = rewrite(at, block, text, len(block))
            yield kind, want, f.name, s, ls


def leak_ops(src, lines, tree, f):
    """M28 / M29: ``torch.set_grad_enabled(False)`` left on by a helper the step calls first."""
    if "import torch" not in src or not f.body:
        return
    first = f.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        first = f.body[1] if len(f.body) > 1 else None
    top = _top_statement(tree, f)
    if first is None or top is None:
        return
    at, ind = _first_line(top), _ind(lines[first.lineno - 1])
    fname, cname = _free_name(src, "settle"), _free_name(src, "Settler")
    for kind, block, call in (
        ("M28-grad-off-in-helper", [f"def {fname}():", "    torch.set_grad_enabled(False)"],
         f"{fname}()"),
        ("M29-grad-off-in-object", [f"class {cname}:", "    def apply(self):",
                                    "        torch.set_grad_enabled(False)"],
         f"{cname}().apply()"),
    ):
        L = lines[:]
        L.insert(first.lineno - 1, ind + call)
        block = block + ["", ""]
        L[at - 1:at - 1] = block
        yield kind, "GT203", f.name, "\n".join(L), {first.lineno + len(block)}
