"""speed30c: the called-words scan answers what the regex alternation and ``str.count`` did,
GT226's backward gate lets through every function that has a loss, and the rules whose
per-loop scans became binary searches report the same on a script of many experiments."""
import ast
import itertools
import re
import textwrap

from gradtrace.lint import check_source
from gradtrace.lint.call_words import call_counts, call_test, called_names
from gradtrace.lint.context import Context
from gradtrace.lint.names import Imports
from gradtrace.lint.nodes import walk
from gradtrace.lint.analysis.steps import step_calls
from gradtrace.lint.rules.grad_mode.optimized_through_no_grad import _may_backward

# whole words, a name holding a combining mark (not a `\w` character), and texts where the
# names are prefixes, suffixes and inner parts of longer words, or follow a dot
NAMES = ("evaluate", "val", "eval_1", "run_eval", "a\u0301b", "x\u093f")
TEXTS = (
    "", "evaluate(model)", "re_evaluate(m)", "evaluate (m)", "self.evaluate(x)",
    "evaluate_all(x) + val(y)", "xval(1) run_eval(2)", "f(evaluate)(x)", "a\u0301b(1)",
    "ca\u0301b(1) x\u093f(2)", "x.val(val(val(1)))", "eval_1(eval_1(", "évaluate(1) val2(3)",
)


def test_call_test_is_the_alternation():
    for k in (1, 2, 3):
        for names in itertools.combinations(NAMES, k):
            test = call_test(names)
            pattern = re.compile(r"\b(?:%s)\(" % "|".join(map(re.escape, sorted(names))))
            for text in TEXTS:
                assert test(text) == (pattern.search(text) is not None), (names, text)
    assert call_test(()) is None


def test_called_names_and_counts_are_the_searches():
    for text in TEXTS:
        for name in NAMES:
            if re.fullmatch(r"\w+", name):
                assert (name in called_names(text)) == bool(re.search(rf"\b{name}\(", text))
        got = call_counts(text, NAMES)
        assert got == {n: text.count(n + "(") for n in NAMES}, text


GATE = textwrap.dedent('''
    import torch
    from torch.autograd import backward as bw

    def plain(model, x):
        model(x).sum().backward()

    def aliased(model, x):
        bw(model(x).sum())

    def manual(self, batch):
        self.manual_backward(self.loss(batch))

    def scaled(scaler, loss):
        scaler.scale(loss).backward()

    def qualified(loss):
        torch.autograd.backward(loss)

    def grads_only(loss, params):
        return torch.autograd.grad(loss, params)

    def nothing(model, x):
        return model(x)
''')


def test_backward_gate_keeps_every_function_with_a_loss():
    tree = ast.parse(GATE)
    imports = Imports()
    for s in tree.body:
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            imports.add(s)
    ctx = Context("gate.py", GATE, tree, imports)
    seen = {}
    for fn in walk(tree):
        if isinstance(fn, ast.FunctionDef):
            seen[fn.name] = (_may_backward(fn, ctx), bool(step_calls(ctx, fn).losses()))
    assert all(gate for gate, losses in seen.values() if losses)
    assert {n for n, (_, losses) in seen.items() if losses} == {
        "plain", "aliased", "manual", "scaled", "qualified"}
    assert not seen["nothing"][0]


EXPERIMENT = '''
model = Net{k}()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for x, y in loader:
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss)
    if x.sum() > 0:
        opt.step()
        loss.backward()
'''


def test_script_of_many_experiments_reports_each_block_alike():
    """GT505 (a loss kept with its graph) is decided from the bindings of the loop's lines in
    a script that rebinds the same names per experiment: each block is reported on its own
    lines, as a script of one block is. GT522 (a backward after the step in the same pass),
    whose backwards are now picked from the loop's lines, reports each block too: a step of
    the same optimizer's name in a later block is not a step of this pass."""
    head = "import torch\nimport torch.nn.functional as F\n"
    one = sorted((f.code, f.line) for f in check_source(head + EXPERIMENT.format(k=0)))
    many_src = head + "".join(EXPERIMENT.format(k=k) for k in range(12))
    many = sorted((f.code, f.line) for f in check_source(many_src))
    block = EXPERIMENT.count("\n")
    assert ("GT505", 12) in one and ("GT522", 11) in one
    per_block = {(c, line + k * block) for k in range(12) for c, line in one}
    assert per_block == set(many)
    assert len([c for c, _ in many if c == "GT522"]) == 24
