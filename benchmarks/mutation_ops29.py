"""The mutation operators added in session 29 (issue 13's shapes), run by ``mutation_recall.py``.

Each operator is one exact AST-located rewrite of a real training step (or ``__init__``, or the
scope that builds an optimizer) and yields ``(kind, expected codes "A|B", function, source,
lines)``; a mutation counts as caught when any expected code is among the findings it adds.

    M13 loss rebuilt from a number  ``loss = torch.tensor(loss.item(), requires_grad=True)``
                                    inserted before ``loss.backward()``          GT106|GT119|GT102
    M14 item on a loss term         ``loss = a + b`` -> ``loss = a + (b).item()``  GT102
    M15 .data on the model output   ``out = model(x)`` -> ``out = (model(x)).data`` for the
                                    output the loss call reads first             GT105|GT107|GT109
    M16 model re-created            ``model = Net(...)`` repeated right after
                                    ``opt = X(model.parameters(), ...)``         GT404|GT447
    M17 child frozen by attribute   ``model.<child>.requires_grad = False`` before the
                                    optimizer (``<child>`` from the class's __init__) GT407
    M17b same in __init__           ``self.<child>.requires_grad = False`` after it is built GT407
    M18 step before backward        ``opt.step()`` moved right before ``loss.backward()``
                                                                           GT609|GT522
    M19 backward after step         ``loss.backward()`` moved right after ``opt.step()``
                                                                           GT609|GT522
    M20 step under @no_grad         ``@torch.no_grad()`` on the training function GT207|GT201
    M21 forward in inference_mode   M11's forward under ``torch.inference_mode()`` GT201|GT204
    M22 zero_grad commented out     every ``zero_grad()`` line -> ``# <same text>`` GT501
    M23 manual update rebinds       ``p -= e`` / ``p.data -= e`` / ``p.data.sub_(e)`` with
                                    ``.grad`` in ``e`` -> ``p = p - (e)``         GT301
"""

import ast


def _ind(line):
    return line[: len(line) - len(line.lstrip())]


def _one_line(n):
    return n.lineno == n.end_lineno


def _has_grad(e):
    return any(isinstance(x, ast.Attribute) and x.attr == "grad" for x in ast.walk(e))


def _optimizer_builds(scope, inner_ids):
    """``opt = X(<target>.parameters(), ...)`` statements directly in ``scope`` (one line)."""
    for n in ast.walk(scope):
        if id(n) in inner_ids or not (isinstance(n, ast.Assign) and _one_line(n)):
            continue
        c = n.value
        if not (isinstance(c, ast.Call) and c.args):
            continue
        name = c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
        a0 = c.args[0]
        if (
            name[:1].isupper()
            and isinstance(a0, ast.Call)
            and isinstance(a0.func, ast.Attribute)
            and a0.func.attr == "parameters"
            and isinstance(a0.func.value, (ast.Name, ast.Attribute))
        ):
            yield n, a0.func.value


def _class_children(tree):
    """class name -> ``self.x = Call(...)`` attribute names of its __init__ (built layers)."""
    out = {}
    for c in ast.walk(tree):
        if not isinstance(c, ast.ClassDef):
            continue
        for fn in c.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                for n in ast.walk(fn):
                    if (
                        isinstance(n, ast.Assign)
                        and isinstance(n.value, ast.Call)
                        and isinstance(n.targets[0], ast.Attribute)
                        and isinstance(n.targets[0].value, ast.Name)
                        and n.targets[0].value.id == "self"
                        and ast.unparse(n.value.func).split(".")[-1][:1].isupper()
                    ):
                        out.setdefault(c.name, []).append((n, n.targets[0].attr))
    return out


def model_wiring(tree, lines, pm):
    """M16, M17, M17b: the model and its optimizer, in any scope."""
    children = _class_children(tree)
    scopes = [tree] + [
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    for sc in scopes:
        inner = set()
        for g in ast.walk(sc):
            if g is not sc and isinstance(
                    g, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner.update(id(x) for x in ast.walk(g))
        for opt, target in _optimizer_builds(sc, inner):
            tgt = ast.unparse(target)
            made = [
                n
                for n in ast.walk(sc)
                if id(n) not in inner
                and isinstance(n, ast.Assign)
                and _one_line(n)
                and n.lineno < opt.lineno
                and len(n.targets) == 1
                and ast.unparse(n.targets[0]) == tgt
                and isinstance(n.value, ast.Call)
                and pm.get(id(n)) is pm.get(id(opt))
            ]
            if not made:
                continue
            m = max(made, key=lambda n: n.lineno)
            name = getattr(sc, "name", "<module>")
            L = lines[:]
            L.insert(opt.lineno, _ind(L[opt.lineno - 1]) + L[m.lineno - 1].strip())
            yield "M16-model-recreated", "GT404|GT447", name, "\n".join(L), {opt.lineno + 1}
            # the class built: Net(...) or Net(...).to(device)
            call = m.value
            while (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Call)
            ):
                call = call.func.value
            cls = ast.unparse(call.func).split(".")[-1] if isinstance(call, ast.Call) else ""
            if children.get(cls):
                child = children[cls][0][1]
                L = lines[:]
                L.insert(
                    opt.lineno - 1,
                    f"{_ind(L[opt.lineno - 1])}{tgt}.{child}.requires_grad = False",
                )
                yield "M17-child-frozen-by-attribute", "GT407", name, "\n".join(L), {opt.lineno}
            break
    for cls, kids in children.items():
        n, child = kids[0]
        if not _one_line(n):
            continue
        L = lines[:]
        L.insert(n.lineno, f"{_ind(L[n.lineno - 1])}self.{child}.requires_grad = False")
        yield "M17b-init-child-frozen", "GT407", cls, "\n".join(L), {n.lineno + 1}


def step_ops(src, lines, pm, f, inner_own, b, s0, zg, loss_assign, out_assign):
    """M13, M14, M15, M18-M22 on one training step ``f`` (backward ``b``, step ``s0``)."""
    torch = "import torch" in src
    tgt = b.value.func.value
    # M13 the loss rebuilt from a number right before backward
    if torch and isinstance(tgt, ast.Name) and _one_line(b):
        L = lines[:]
        L.insert(
            b.lineno - 1,
            f"{_ind(L[b.lineno - 1])}{tgt.id} = torch.tensor({tgt.id}.item(), requires_grad=True)",
        )
        yield "M13-loss-from-number", "GT106|GT119|GT102", f.name, "\n".join(L), {b.lineno}
    # M14 .item() on the last term of a summed loss
    if loss_assign is not None and _one_line(loss_assign):
        v = loss_assign.value
        if (
            isinstance(v, ast.BinOp)
            and isinstance(v.op, ast.Add)
            and not isinstance(v.right, ast.Constant)
            and lines[loss_assign.lineno - 1].isascii()
        ):
            r = v.right
            line = lines[loss_assign.lineno - 1]
            new = f"{line[:r.col_offset]}({line[r.col_offset:r.end_col_offset]}).item()" \
                  f"{line[r.end_col_offset:]}"
            L = lines[:]
            L[loss_assign.lineno - 1] = new
            yield "M14-item-on-loss-term", "GT102", f.name, "\n".join(L), {loss_assign.lineno}
    # M15 / M21 the model output the loss reads
    if out_assign is not None and lines[out_assign.lineno - 1].isascii():
        v = out_assign.value
        line = lines[out_assign.lineno - 1]
        new = f"{line[:v.col_offset]}({line[v.col_offset:v.end_col_offset]}).data" \
              f"{line[v.end_col_offset:]}"
        L = lines[:]
        L[out_assign.lineno - 1] = new
        yield "M15-data-on-output", "GT105|GT107|GT109", f.name, "\n".join(L), {out_assign.lineno}
        if torch:
            L = lines[:]
            ind = _ind(line)
            L[out_assign.lineno - 1] = \
                f"{ind}with torch.inference_mode():\n{ind}    {line.strip()}"
            yield (
                "M21-forward-inference-mode", "GT201|GT204", f.name, "\n".join(L),
                {out_assign.lineno},
            )
    # M18 / M19 step and backward swapped (same block, one line each)
    if (
        pm[id(b)] is pm[id(s0)]
        and b.lineno < s0.lineno
        and _one_line(b)
        and _one_line(s0)
    ):
        L = lines[:]
        st = L.pop(s0.lineno - 1)
        L.insert(b.lineno - 1, st)
        yield "M18-step-before-backward", "GT609|GT522", f.name, "\n".join(L), {b.lineno}
        L = lines[:]
        bw = L[b.lineno - 1]
        L.insert(s0.lineno, bw)
        del L[b.lineno - 1]
        yield "M19-backward-after-step", "GT609|GT522", f.name, "\n".join(L), {s0.lineno - 1}
    # M20 the training function decorated @torch.no_grad()
    if torch:
        L = lines[:]
        L.insert(f.lineno - 1, f"{_ind(L[f.lineno - 1])}@torch.no_grad()")
        yield "M20-step-under-no-grad-decorator", "GT207|GT201", f.name, "\n".join(L), {f.lineno}
    # M22 every zero_grad() commented out, its text kept
    if zg:
        L = lines[:]
        for z in zg:
            L[z.lineno - 1] = f"{_ind(L[z.lineno - 1])}# {L[z.lineno - 1].strip()}\n" \
                              f"{_ind(L[z.lineno - 1])}pass"
        yield "M22-zero-grad-commented", "GT501", f.name, "\n".join(L), {z.lineno for z in zg}


def manual_update(lines, f, own_nodes):
    """M23: an in-place manual update of a weight from its ``.grad`` made a rebinding."""
    for n in own_nodes:
        if not isinstance(n, ast.stmt) or not _one_line(n) or not lines[n.lineno - 1].isascii():
            continue
        target = expr = None
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Sub) and _has_grad(n.value):
            t = n.target
            if isinstance(t, ast.Attribute) and t.attr == "data":
                t = t.value
            if isinstance(t, (ast.Name, ast.Attribute)):
                target, expr = t, n.value
        elif (
            isinstance(n, ast.Expr)
            and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Attribute)
            and n.value.func.attr == "sub_"
            and len(n.value.args) == 1
            and not n.value.keywords
            and _has_grad(n.value.args[0])
        ):
            t = n.value.func.value
            if isinstance(t, ast.Attribute) and t.attr == "data":
                t = t.value
            if isinstance(t, (ast.Name, ast.Attribute)):
                target, expr = t, n.value.args[0]
        if target is None:
            continue
        name = ast.unparse(target)
        L = lines[:]
        L[n.lineno - 1] = f"{_ind(L[n.lineno - 1])}{name} = {name} - ({ast.unparse(expr)})"
        yield "M23-manual-update-rebinds", "GT301", f.name, "\n".join(L), {n.lineno}
        return
