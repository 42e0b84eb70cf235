"""Recall on real code: inject known gradient bugs into real training loops, count the catches.

For every function of the given source trees that calls ``backward()`` and an optimizer's
``step()`` (and every ``__init__`` that builds an ``nn.ModuleList``), each applicable
mutation below makes one buggy copy of its file; the checker
(default rules) runs on the original and on the copy, and a mutation counts as caught when
the expected code is among the findings the copy adds:

    M1 no zero_grad        every ``*.zero_grad()`` line of the function removed   GT501
    M2 zero_grad between   the first one moved right after ``backward()``         GT503
    M3 clip after step     ``clip_grad_norm_`` moved right after ``step()``       GT504
    M5 detached loss input the loss call's first argument gets ``.detach()``      GT107
    M6 loss under no_grad  the loss assignment wrapped in ``torch.no_grad()``     GT201
    M7 grad disabled       ``torch.set_grad_enabled(False)`` first in the function GT203
    M8 layers in a list    ``self.x = nn.ModuleList([...])`` in __init__ -> ``[...]`` GT401
    M11 forward no_grad    the model output the loss uses computed under no_grad  GT201
    M12 zero_grad hoisted  the loop's ``zero_grad()`` moved before the loop        GT502

and M13-M23 (session 29: the loss rebuilt from a number, ``.item()`` on a loss term,
``.data`` on the model output, the model re-created after its optimizer, a child "frozen"
by a plain attribute, step and backward swapped, ``@torch.no_grad()`` on the step, the forward
in ``inference_mode``, ``zero_grad()`` commented out, a manual update that rebinds), described
in ``mutation_ops29.py``, and M24-M27 (session 46: the cut moved one call away, into a helper
function or a method of the step's class, and M7's grad switch moved into a helper) in ``mutation_ops46.py``,
and M30 (session 47: a ``.detach()`` inside a module's ``forward``) in ``mutation_ops47.py``,
and M31 (session 48: a model's ``eval()``/``train()`` statements removed from a step that
evaluates it under ``no_grad``) in ``mutation_ops48.py``, and M32 (session 49: full backward
hooks put on every leaf of a model holding an in-place activation) in ``mutation_ops49.py``,
and M33-M34 (session 50: a part of a model built anew, then frozen itself) in
``mutation_ops50.py``, M35-M36 (session 50: a term cut in a loss helper the step
backpropagates, or in a sum it reduces at the backward) in ``mutation_ops50a.py``, M37
(session 51: the loss re-made a new leaf in the loss function or module it is bound to) in
``mutation_ops51a.py``.
``--ops M13,M16`` runs only
the named operators.

A miss is not always a bug of the checker (a mutation can land in a shape where the bug is
not decidable statically); ``--misses FILE`` writes them for reading.

    python benchmarks/mutation_recall.py TREE [TREE ...] [--misses misses.json]

(``benchmarks/get_corpus.sh`` fetches a corpus; docs/triage/ lists the ones used.)
"""

import ast
import collections
import hashlib
import json
import os
import sys

from gradtrace.lint import check_source
from mutation_ops29 import manual_update, model_wiring, step_ops
from mutation_ops46 import away_ops, leak_ops
from mutation_ops47 import forward_ops
from mutation_ops48 import mode_ops
from mutation_ops49 import hook_ops
from mutation_ops50 import head_ops
from mutation_ops50a import helper_ops
from mutation_ops51a import leaf_ops


def files(roots):
    seen = set()
    for r in roots:
        for root, _, fs in os.walk(r):
            for f in fs:
                if not f.endswith(".py"):
                    continue
                p = os.path.join(root, f)
                try:
                    data = open(p, "rb").read()
                except OSError:
                    continue
                if b"torch" not in data or not (
                    b"zero_grad" in data and b"backward" in data or b"ModuleList(" in data
                ):
                    continue
                h = hashlib.md5(data).hexdigest()
                if h in seen:
                    continue
                seen.add(h)
                yield p, data.decode("utf-8", "replace")


def attr_call(node, name):
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
    )


def expr_stmts(scope, name):
    out = []
    for n in ast.walk(scope):
        if isinstance(n, ast.Expr) and attr_call(n.value, name) and n.lineno == n.end_lineno:
            out.append(n)
    return out


def scopes(tree):
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for f in funcs:
        inner = [
            g
            for g in ast.walk(f)
            if g is not f and isinstance(g, (ast.FunctionDef, ast.AsyncFunctionDef))
        ]
        # skip scopes whose backward is only in nested functions
        yield f, inner


def own(scope, inner, nodes):
    bad = set()
    for g in inner:
        bad.update(id(x) for x in ast.walk(g))
    return [n for n in nodes if id(n) not in bad]


def indent_of(line):
    return line[: len(line) - len(line.lstrip())]


def parent_map(tree):
    pm = {}
    for n in ast.walk(tree):
        for c in ast.iter_child_nodes(n):
            pm[id(c)] = n
    return pm


def replace_span(lines, node, by, text=None):
    """The source with ``node``'s text replaced by ``by``'s (or by ``text``); None for
    non-ASCII lines (ast columns count UTF-8 bytes)."""
    def offset(line, col):
        return sum(len(x) + 1 for x in lines[: line - 1]) + col

    rows = lines[node.lineno - 1:node.end_lineno]
    if not all(r.isascii() for r in rows):
        return None
    src = "\n".join(lines)
    if text is None:
        text = src[offset(by.lineno, by.col_offset):offset(by.end_lineno, by.end_col_offset)]
    a = offset(node.lineno, node.col_offset)
    return src[:a] + text + src[offset(node.end_lineno, node.end_col_offset):]


def name_assigns(f, inner, name, before):
    """Single-line ``name = ...`` statements of ``f`` (not of nested functions) before a line."""
    return [
        n
        for n in own(f, inner, list(ast.walk(f)))
        if isinstance(n, ast.Assign)
        and n.lineno < before
        and len(n.targets) == 1
        and isinstance(n.targets[0], ast.Name)
        and n.targets[0].id == name
        and n.lineno == n.end_lineno
    ]


def mutate(src):
    lines = src.split("\n")
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return
    pm = parent_map(tree)
    yield from model_wiring(tree, lines, pm)
    yield from forward_ops(src, lines, tree)
    yield from hook_ops(src, lines, tree)
    yield from head_ops(src, lines, tree)
    # M8 layers kept in a plain list: `self.x = nn.ModuleList(...)` in __init__ -> `list(...)`
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "__init__"):
            continue
        for n in ast.walk(fn):
            if (
                isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Call)
                and (ast.unparse(n.value.func).endswith("ModuleList"))
                and n.value.args
                and isinstance(n.targets[0], ast.Attribute)
            ):
                call, arg = n.value, n.value.args[0]
                text = replace_span(lines, call, arg)  # nn.ModuleList([...]) -> [...]
                if text is not None:
                    if not isinstance(arg, (ast.List, ast.ListComp)):
                        text = replace_span(lines, call.func, None, "list")
                    if text is not None:
                        yield "M8-layers-in-list", "GT401", fn.name, text, {n.lineno}
                        break
    for f, inner in scopes(tree):
        bw = own(f, inner, expr_stmts(f, "backward"))
        st = [
            s
            for s in own(f, inner, expr_stmts(f, "step"))
            if isinstance(s.value.func.value, (ast.Name, ast.Attribute))
            and "opt" in ast.unparse(s.value.func.value).lower()
        ]
        zg = own(f, inner, expr_stmts(f, "zero_grad"))
        if bw:
            yield from manual_update(lines, f, own(f, inner, list(ast.walk(f))))
        if not (bw and st):
            continue
        b, s0 = bw[0], st[0]
        # M1 missing zero_grad
        if zg:
            L = lines[:]
            for z in zg:
                L[z.lineno - 1] = indent_of(L[z.lineno - 1]) + "pass"
            yield "M1-no-zero-grad", "GT501", f.name, "\n".join(L), {z.lineno for z in zg}
        # M2 zero_grad between backward and step (same block as backward)
        if zg and b.lineno < s0.lineno and pm[id(b)] is pm[id(s0)]:
            z = zg[0]
            L = lines[:]
            ztext = L[z.lineno - 1].strip()
            L[z.lineno - 1] = indent_of(L[z.lineno - 1]) + "pass"
            L.insert(b.lineno, indent_of(L[b.lineno - 1]) + ztext)
            yield "M2-zero-grad-between", "GT503", f.name, "\n".join(L), {b.lineno + 1}
        # M3 clip after step
        clips = [
            c
            for c in own(
                f,
                inner,
                [
                    n
                    for n in ast.walk(f)
                    if isinstance(n, ast.Expr)
                    and isinstance(n.value, ast.Call)
                    and (getattr(n.value.func, "attr", None) or getattr(n.value.func, "id", ""))
                    in ("clip_grad_norm_", "clip_grad_value_")
                    and n.lineno == n.end_lineno
                ],
            )
        ]
        for c in clips:
            if pm[id(c)] is pm[id(s0)] and c.lineno < s0.lineno and s0.lineno == s0.end_lineno:
                L = lines[:]
                ctext = L[c.lineno - 1].strip()
                L.insert(s0.lineno, indent_of(L[s0.lineno - 1]) + ctext)
                L[c.lineno - 1] = indent_of(L[c.lineno - 1]) + "pass"
                yield "M3-clip-after-step", "GT504", f.name, "\n".join(L), {s0.lineno + 1}
                break
        # M12 zero_grad hoisted out of the loop that runs backward and step
        if zg:
            z = zg[0]
            loop = pm.get(id(z))
            if (
                isinstance(loop, ast.For)
                and z in loop.body
                and any(x is b or x is s0 for x in ast.walk(loop))
                and all(x in ast.walk(loop) for x in (b, s0))
            ):
                L = lines[:]
                ztext = L[z.lineno - 1].strip()
                L[z.lineno - 1] = indent_of(L[z.lineno - 1]) + "pass"
                L.insert(loop.lineno - 1, indent_of(L[loop.lineno - 1]) + ztext)
                yield "M12-zero-grad-outside-loop", "GT502", f.name, "\n".join(L), {loop.lineno}
        # loss assignment: Name.backward() -> last single-line assignment of that name before it
        tgt = b.value.func.value
        a = o = None
        if isinstance(tgt, ast.Name):
            assigns = name_assigns(f, inner, tgt.id, b.lineno)
            if assigns:
                a = max(assigns, key=lambda n: n.lineno)
                call = a.value
                if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name):
                    outs = [
                        n
                        for n in name_assigns(f, inner, call.args[0].id, a.lineno)
                        if isinstance(n.value, ast.Call) and pm[id(n)] is pm[id(a)]
                    ]
                    if outs:
                        o = max(outs, key=lambda n: n.lineno)
                if o is None:  # M15/M21: the first name of the loss bound by a call
                    for nm in ast.walk(a.value):
                        if isinstance(nm, ast.Name) and isinstance(nm.ctx, ast.Load):
                            outs = [
                                n
                                for n in name_assigns(f, inner, nm.id, a.lineno)
                                if isinstance(n.value, ast.Call) and pm[id(n)] is pm[id(a)]
                            ]
                            if outs:
                                o = max(outs, key=lambda n: n.lineno)
                                break
        yield from step_ops(src, lines, pm, f, inner, b, s0, zg, a, o)
        yield from away_ops(src, lines, pm, tree, f, o)
        yield from helper_ops(src, lines, tree, f, b, a)
        yield from leaf_ops(src, lines, tree, f, a)
        if isinstance(tgt, ast.Name):
            assigns = name_assigns(f, inner, tgt.id, b.lineno)
            if assigns:
                a = max(assigns, key=lambda n: n.lineno)
                call = a.value
                # M5 detach the first tensor-looking argument of the loss call
                if (
                    isinstance(call, ast.Call)
                    and call.args
                    and isinstance(
                        call.args[0], (ast.Name, ast.Call, ast.Attribute, ast.Subscript)
                    )
                ):
                    arg = call.args[0]
                    line = lines[a.lineno - 1]
                    if arg.lineno == a.lineno and arg.end_lineno == a.lineno:
                        # col offsets are in utf-8 bytes; assume ascii lines
                        if line.isascii():
                            a0, a1 = arg.col_offset, arg.end_col_offset
                            new = f"{line[:a0]}({line[a0:a1]}).detach(){line[a1:]}"
                            L = lines[:]
                            L[a.lineno - 1] = new
                            yield "M5-detach-loss-input", "GT107", f.name, "\n".join(L), {a.lineno}
                # M11 the model output the loss is built from computed under no_grad
                if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name):
                    outs = [
                        n
                        for n in name_assigns(f, inner, call.args[0].id, a.lineno)
                        if isinstance(n.value, ast.Call) and pm[id(n)] is pm[id(a)]
                    ]
                    if outs and "import torch" in src:
                        o = max(outs, key=lambda n: n.lineno)
                        L = lines[:]
                        ind = indent_of(L[o.lineno - 1])
                        stmt = L[o.lineno - 1].strip()
                        L[o.lineno - 1] = f"{ind}with torch.no_grad():\n{ind}    {stmt}"
                        kind = "M11-forward-under-no-grad"
                        yield kind, "GT201", f.name, "\n".join(L), {o.lineno}
                # M6 loss under no_grad
                if "import torch" in src and not isinstance(pm[id(a)], ast.Module):
                    L = lines[:]
                    ind = indent_of(L[a.lineno - 1])
                    L[a.lineno - 1] = (
                        ind + "with torch.no_grad():\n" + ind + "    " + L[a.lineno - 1].strip()
                    )
                    yield (
                        "M6-loss-under-no-grad",
                        "GT201",
                        f.name,
                        "\n".join(L),
                        {a.lineno, a.lineno + 1},
                    )
        # M7 set_grad_enabled(False) leaked at the top of the training function
        if "import torch" in src and f.body:
            first = f.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                first = f.body[1] if len(f.body) > 1 else None
            if first is not None:
                L = lines[:]
                ind = indent_of(L[first.lineno - 1])
                L.insert(first.lineno - 1, ind + "torch.set_grad_enabled(False)")
                yield "M7-grad-disabled", "GT203", f.name, "\n".join(L), {first.lineno}
            yield from leak_ops(src, lines, tree, f)
        yield from mode_ops(lines, f)


def codes(src, path):
    try:
        return collections.Counter(f.code for f in check_source(src, path))
    except Exception:  # the checker must not stop the study
        return None


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--misses", help="write the mutations not caught (file:line:function [other new codes]) here")
    ap.add_argument("--ops", help="comma-separated operator prefixes to run (M13,M16,...)")
    args = ap.parse_args()
    stats = collections.defaultdict(
        lambda: [0, 0, 0]
    )  # applied, detected(expected), any-new-finding
    misses = collections.defaultdict(list)
    others = collections.defaultdict(collections.Counter)
    nfiles = 0
    ops = args.ops.split(",") if args.ops else None
    for path, src in files(args.trees):
        muts = [m for m in mutate(src)
                if not ops or any(m[0].split("-")[0] == o for o in ops)]
        base = codes(src, path) if muts or not ops else None  # no copy: no need to check
        if base is None and (muts or not ops):
            continue
        nfiles += 1
        if nfiles % 50 == 0:
            print(f"... {nfiles} files", file=sys.stderr, flush=True)
        for kind, want, fname, msrc, lines in muts:
            got = codes(msrc, path)
            if got is None:
                continue
            new = got - base
            st = stats[kind]
            st[0] += 1
            if any(new.get(w) for w in want.split("|")):
                st[1] += 1
            else:  # not caught: where, and what else the copy adds
                misses[kind].append(f"{path}:{min(lines)}:{fname} {sorted(new)}")
            if new:
                st[2] += 1
            for c in new:
                if c not in want.split("|"):
                    others[kind][c] += 1
    print(f"{nfiles} files with a training loop or an nn.ModuleList")
    for k in sorted(stats):
        a, d, n = stats[k]
        print(f"{k:24s} applied {a:4d}  caught {d:4d} ({d / a:.0%})  any new finding "
              f"{n:4d} ({n / a:.0%})  other codes {dict(others[k].most_common(4))}")
    if args.misses:
        with open(args.misses, "w", encoding="utf-8") as fh:
            json.dump(misses, fh, indent=1)


if __name__ == "__main__":
    main()
