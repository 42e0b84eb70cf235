"""Shapes from the projects of docs/triage/unseen50b.md (session 50), each in another spelling
than the project's and next to a buggy twin that is still reported; each is a small project in
tmp_path, checked in-process and run on real torch."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings
from imports_as_found import imports_as_found

torch = pytest.importorskip("torch")

# OpenPSG's `PostProcessor` (moshuilanting/fast-context-scene-graph-generation): a module of
# its own file whose `forward` writes into a softmax's output; the relation head of another
# file builds it and calls it only from `get_result`, which only `simple_test` calls (or, in
# the maskrcnn-benchmark heads, only under `if not self.training:`). NOTE [run only for
# inference]
POST = """
    import torch.nn as nn
    import torch.nn.functional as F


    class PostProcessor(nn.Module):
        def forward(self, logits):
            prob = F.softmax(logits, -1)
            prob[:, 0] = 0
            scores, labels = prob[:, 1:].max(dim=1)
            return scores, labels + 1
    """
POST_LINE = 9  # `prob[:, 0] = 0`
HEADS = {
    # called from a method that only an inference method calls
    "get-result": """
        def forward(self, x):
            return self.fc(x)

        def get_result(self, logits):
            return self.post(logits)

        def simple_test(self, x):
            return self.get_result(self.fc(x))
    """,
    # called only in the eval branch of the head's forward
    "eval-branch": """
        def forward(self, x):
            logits = self.fc(x)
            if not self.training:
                return self.post(logits)
            return logits
    """,
    # twin: the training forward runs it; backward meets the overwritten softmax output
    "trained": """
        def forward(self, x):
            scores, labels = self.post(self.fc(x))
            return scores

        def simple_test(self, x):
            return self.post(self.fc(x))
    """,
}
HEAD = """
    import torch.nn as nn
    from post import PostProcessor


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 4)
            self.post = PostProcessor()
{methods}
    """
TRAIN = """
    import torch
    from head import Head
    torch.manual_seed(0)
    head = Head()
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    out = head(x)
    loss = (out[0] if isinstance(out, tuple) else out).pow(2).mean()
    loss.backward()
    opt.step()
    head.eval()
    result = head.simple_test(x) if hasattr(head, "simple_test") else head(x)
    """


def _project(tmp_path: Path, methods: str) -> Path:
    body = textwrap.indent(textwrap.dedent(methods), " " * 8)
    for name, text in (("post.py", POST), ("head.py", HEAD.format(methods=body)),
                       ("train.py", TRAIN)):
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def _run(tmp_path: Path) -> str | None:
    """Runs the project's script on real torch: the error backward raises, or None."""
    with imports_as_found(tmp_path):  # `post`, `head` gone afterwards
        try:
            runpy.run_path(str(tmp_path / "train.py"))
        except RuntimeError as e:
            return str(e)
    return None


@pytest.mark.parametrize("case, line", [
    ("get-result", None), ("eval-branch", None), ("trained", POST_LINE)])
def test_post_processor_run_only_for_inference(tmp_path: Path, case: str,
                                               line: int | None) -> None:
    """Look-alikes: the post-processor runs only for inference (no backward goes through
    it, the script runs); twin: the head's training forward runs it, backward raises, and
    GT602 is reported at the write."""
    root = _project(tmp_path, HEADS[case])
    found = check_paths([str(root / "post.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code.startswith("GT6")] == (
        [] if line is None else [(line, "GT602")])
    error = _run(root)
    assert (error is None) == (line is None)
    if error is not None:
        assert "modified by an inplace operation" in error


# jinensetpal/scene-graph-generation: `fit(model, optimizer, loss, train)` appends every
# batch's `loss(y, y_pred)`, and the loss module hands back `[torch.tensor(..., requires_grad=
# True) for ...]`: fresh leaves without history, no graph kept (NOTE [fresh leaves collected]).
# Twins: the module returns the terms themselves (graphs kept), or the leaves are summed with
# `+=` (one node recorded per step).
FIT = """
    import torch
    import torch.nn as nn


    class TermLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.ce = nn.CrossEntropyLoss()

        def forward(self, y, out):
            terms = {{"ce": [self.ce(out, y)], "l2": [out.pow(2).mean()]}}
            return [{term} for v in terms.values()]


    def fit(model, optimizer, loss, batches):
        history, total = [], 0
        for epoch in range(2):
            history.append([])
            for x, y in batches:
                optimizer.zero_grad()
                batch_loss = loss(y, model(x))
                sum(batch_loss).backward()
                optimizer.step()
                {collect}
        return history, total


    torch.manual_seed(0)
    net = nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    data = [(torch.randn(4, 3), torch.randint(0, 2, (4,)))]
    criterion = TermLoss()
    history, total = fit(net, opt, criterion, data)
    kept = history[0][0][0] if history[0] else total
    """
LEAF = "torch.tensor(sum(v) / len(v), requires_grad=True)"


@pytest.mark.parametrize("term, collect, line", [
    (LEAF, "history[-1].append(batch_loss)", None),
    ("sum(v) / len(v)", "history[-1].append(batch_loss)", 25),
    (LEAF, "total += batch_loss[0]", 25)])
def test_fresh_leaves_collected(tmp_path: Path, term: str, collect: str,
                                line: int | None) -> None:
    """Look-alike: the appended values are leaves without history (`grad_fn` None), GT505
    silent; twins: appended terms keep their graphs, and `+=` of the leaves records a node per
    step: GT505 at the collecting line."""
    path = tmp_path / "fit.py"
    path.write_text(textwrap.dedent(FIT.format(term=term, collect=collect)))
    found = check_paths([str(path)], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT505"] == (
        [] if line is None else [(line, "GT505")])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        kept = runpy.run_path(str(path))["kept"]
    assert (kept.grad_fn is None) == (line is None)


def test_fresh_leaves_of_a_loss_module_of_another_file(tmp_path: Path) -> None:
    """The loss module in its own file (jinensetpal's `loss.py`), imported by the training
    script: read there through the project index; the appended leaves keep no graph."""
    src = textwrap.dedent(FIT.format(term=LEAF, collect="history[-1].append(batch_loss)"))
    head, _, rest = src.partition("\n\ndef fit(")
    (tmp_path / "terms.py").write_text(head + "\n")
    (tmp_path / "fit.py").write_text("import torch\nimport torch.nn as nn\n"
                                     "from terms import TermLoss\n\n\ndef fit(" + rest)
    found = check_paths([str(tmp_path / "fit.py")], Settings()).findings
    assert [f.code for f in found if f.code == "GT505"] == []
    twin = (tmp_path / "terms.py").read_text().replace(LEAF, "sum(v) / len(v)")
    (tmp_path / "terms.py").write_text(twin)
    found = check_paths([str(tmp_path / "fit.py")], Settings()).findings
    assert [(f.line, f.code) for f in found if f.code == "GT505"] == [(15, "GT505")]
