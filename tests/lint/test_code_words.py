"""Comments and strings never decide a finding: triggers and text searches see code only."""
from __future__ import annotations

import ast
import io
import os
import tokenize

import pytest

from check_each import check_each
from example_families import FAMILIES, examples
from gradtrace.lint import check_paths, check_source
from gradtrace.lint.code_text import code_text
from gradtrace.lint.config import Settings
from gradtrace.lint.registry import all_rules

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# every trigger word, and the words the rules' own text searches look for
EXTRA = ("optimizer.zero_grad()", "opt.zero_grad(set_to_none=True)", "model.zero_grad()",
         "p.grad = None", "p.grad.zero_()", "loss.backward()", "optimizer.step()",
         "torch.no_grad()", "torch.set_grad_enabled(False)", "torch.inference_mode()",
         "requires_grad = False", "requires_grad_(False)", "freeze", "retain_graph=True",
         "reduction='none'", "reduce=False", "def step(", "def load_state_dict(",
         "training_step", "x.detach()", "self.layers = []", "for x in loader:",
         "deepcopy(", "load_state_dict(", "len(loader) last final end", "import torch",
         "nn.Parameter", "nn.Module", "total += loss", "losses.append(loss)", "float('inf')")
WORDS = " ".join(sorted({w for r in all_rules()
                         for w in (*r.triggers, *r.statement_triggers, *r.function_requires,
                                   *getattr(r, "needs", ()))} | set(EXTRA)))


def decorate(src: str) -> tuple[str, list[int]]:
    """``src`` with ``WORDS`` in a comment on every line, in a module docstring, in a docstring
    of every def and class and in a string statement opening every loop body.

    Returns the new source and, for each of its lines, the line of ``src`` it came from.
    """
    tree = ast.parse(src)
    lines = src.splitlines()
    comment_at: dict[int, int] = {}  # line -> column where the comment goes
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.NL) and tok.start[0] <= len(lines):
            comment_at.setdefault(tok.start[0], tok.start[1])
    inserts: dict[int, str] = {}  # before line n: the indentation of a string statement
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.For, ast.AsyncFor, ast.While)):
            first = node.body[0]
            start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
            if start > node.lineno and first.col_offset > node.col_offset:
                inserts[start] = lines[first.lineno - 1][:first.col_offset]
    out, origin = [f'"""{WORDS}"""'], [0]
    for n, line in enumerate(lines, 1):
        if n in inserts:
            out.append(f'{inserts[n]}"{WORDS}"')
            origin.append(n)
        col = comment_at.get(n)
        out.append(line if col is None else f"{line[:col]}  # {WORDS}{line[col:]}")
        origin.append(n)
    return "\n".join(out) + "\n", origin


def _found(src: str) -> list[tuple[str, int, int]]:
    return sorted((f.code, f.line, f.column) for f in check_source(src, "example.py"))


def _unchanged_by_words(pair) -> None:
    decorated, origin = decorate(pair[1].code)
    before = [(code, line) for code, line, _ in _found(pair[1].code)]
    after = sorted((code, origin[line - 1]) for code, line, _ in _found(decorated))
    assert after == before


@pytest.mark.parametrize("fam", FAMILIES)  # one item per rule family (tests/check_each.py)
def test_words_in_comments_and_strings_change_no_finding(fam, monkeypatch):
    monkeypatch.setenv("GRADTRACE_STRICT", "1")
    assert check_each(examples(fam), _unchanged_by_words)


def test_decorate_puts_every_word_in_comments_and_strings():
    src = "import torch\nfor x in y:\n    def f(a):\n        return a\n"
    decorated, origin = decorate(src)
    assert "zero_grad" in decorated and decorated.count(WORDS) == 7
    assert "zero_grad" not in code_text(decorated)
    assert [origin[i] for i, ln in enumerate(decorated.splitlines()) if "return a" in ln] == [4]


def test_code_text_keeps_lines_and_code_only():
    src = ('x = 1  # zero_grad\n'
           's = """zero_grad\nbackward"""; y = f"{opt.zero_grad()} step {{zero}}" + \'#\'\n'
           "z = rb'\\'detach' if a else (b  # comment\n"
           ")\n")
    assert code_text(src).splitlines() == [
        "x = 1  #",
        's = ""',
        '; y = f"" opt.zero_grad()  + ""',
        'z = rb"" if a else (b  #',
        ")",
    ]


def test_code_text_matches_the_tokenizer_on_this_package():
    """Every name the tokenizer sees is kept, on its line; nothing else is (f-strings aside)."""
    import re

    name = re.compile(r"(?<!\w)[A-Za-z_]\w*(?![\w\"'])")  # a string's prefix is no name
    src_dir = os.path.join(ROOT, "src", "gradtrace")
    for root, _, files in os.walk(src_dir):
        for f in files:
            if not f.endswith(".py"):
                continue
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
            code = code_text(text).splitlines()
            want: dict[int, list[str]] = {}
            fstring_lines: set[int] = set()
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.NAME:
                    want.setdefault(tok.start[0], []).append(tok.string)
                elif tok.type == tokenize.STRING and re.match(r"[rRbB]?[fF]", tok.string):
                    fstring_lines.update(range(tok.start[0], tok.end[0] + 1))
            assert len(code) == len(text.splitlines()), f
            for n, line in enumerate(code, 1):
                got = name.findall(line)
                if n in fstring_lines:
                    assert set(want.get(n, ())) <= set(got), (f, n)
                else:
                    assert sorted(got) == sorted(want.get(n, ())), (f, n, line)


COMMENTED_OUT = """\
import torch
import torch.nn.functional as F

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    # opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()  # forgot zero_grad
    opt.step()
"""


def test_a_commented_out_zero_grad_is_still_missing():
    # reported on the commented-out call: the line to change (NOTE [commented-out call])
    assert [(f.code, f.line) for f in check_source(COMMENTED_OUT)] == [("GT501", 7)]
    fixed = COMMENTED_OUT.replace("# opt.zero_grad()", "opt.zero_grad()")
    assert [f.code for f in check_source(fixed)] == []


def test_zero_grad_missing_example_is_caught_statically():
    path = os.path.join(ROOT, "examples", "runtime", "zero_grad_missing.py")
    with open(path, encoding="utf-8") as fh:
        assert "zero_grad() is never called" in fh.read()  # the docstring that silenced it
    found = check_paths([path], Settings(exclude=())).findings
    assert [(f.code, f.line) for f in found] == [("GT501", 11)]


def test_a_file_mentioning_torch_only_in_comments_is_not_checked(tmp_path):
    body = "x = ones(1)\nx.item().backward()\n"
    (tmp_path / "a.py").write_text("# a torch script\n" + body)
    (tmp_path / "b.py").write_text("import torch\n" + body)
    found = check_paths([str(tmp_path)], Settings(exclude=())).findings
    assert {os.path.basename(f.path) for f in found} == {"b.py"}


LOOP = """\
import torch
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()  {tail}
    opt.step()
{after}
"""


@pytest.mark.parametrize("tail, after, line", [
    ("", "", 4),                                                  # nothing: the backward
    ("# forgot zero_grad() here", "", 4),                         # prose: still the backward
    ("", "    # zero_grad is for later, opt.zero_grad() once", 4),  # prose naming the call
    ("", "    # opt.zero_grad()", 6),                             # the call, commented out
    ("", "    #opt.zero_grad(set_to_none=True)  # slow", 6),
    ("", "# opt.zero_grad()", 4),                                 # not in the loop
    ("", "    # other_opt.zero_grad()", 6),                       # any clearing call
])
def test_commented_out_zero_grad_is_where_gt501_points(tail, after, line):
    """A comment never decides GT501, but a commented-out `zero_grad()` call in the loop is
    the line to change (NOTE [commented-out call])."""
    src = LOOP.format(tail=tail, after=after)
    found = [(f.code, f.line) for f in check_source(src, "loop.py") if f.code == "GT501"]
    assert found == [("GT501", line)]
