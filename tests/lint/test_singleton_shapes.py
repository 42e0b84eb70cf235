"""GT762/GT763 (numerics/singleton.py) and the shape reader under them (analysis/dims.py,
NOTE [singleton dims]): which dimension indices the file shows have size one, read honestly
(a front index only with the rank; broadcasting, squeeze and unknown inputs are silent)."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""


def _found(body: str, codes=("GT762", "GT763")) -> list[tuple[str, int]]:
    src = HEAD + textwrap.dedent(body)
    return [(f.code, f.line) for f in check_source(src, "m.py") if f.code in codes]


def _marked(body: str) -> list[tuple[str, int]]:
    src = HEAD + textwrap.dedent(body)
    return [(t.rsplit("# ", 1)[1].strip(), i) for i, t in enumerate(src.splitlines(), 1)
            if "# GT76" in t]


SOFTMAX_BUGS = {
    # `view(b, t, 1)` spelled with a literal 1 as the last size; softmax over dim 2 (rank 3)
    "view_with_literal_one": """
        def pool(h, b, t):
            s = h.view(b, t, 1)
            return torch.softmax(s, dim=2)  # GT762
        """,
    # the keepdim reduction through `.max(..., keepdim=True)[0]`
    "max_keepdim_values": """
        def pool(h):
            s = h.max(-1, keepdim=True)[0]
            return F.softmax(s * 2.0, dim=-1)  # GT762
        """,
    # a Linear(d, 1) on a rank-known input, transposed: [T, B, 1] -> [1, B, T]; softmax dim 0
    "transpose_moves_the_one_to_the_front": """
        score = nn.Linear(8, 1)

        def pool(h, t, b):
            s = score(h.reshape(t, b, 8)).transpose(0, 2)
            return s.log_softmax(0)  # GT762
        """,
    # permute with the rank known: [B, T, 1] -> [B, 1, T], softmax over dim 1
    "permute_moves_the_one": """
        score = nn.Linear(8, 1)

        def pool(h, b, t):
            s = score(h.view(b, t, 8)).permute(0, 2, 1)
            return s.softmax(dim=1)  # GT762
        """,
    # an nn.Softmax built in place on a (k, 1) factory tensor's matmul
    "inline_softmax_module_on_matmul": """
        w = torch.randn(16, 1, requires_grad=True)

        def pool(h):
            return nn.Softmax(dim=-1)(h @ w)  # GT762
        """,
}

SOFTMAX_LOOKALIKES = {
    # dim 1 of a Linear(d, 1) output whose rank is unknown: dim 1 may be the positions
    "front_index_rank_unknown": """
        score = nn.Linear(8, 1)

        def pool(h):
            return F.softmax(score(h), dim=1)
        """,
    # transposed with the rank known: [B, T, 1] -> [B, 1, T]... softmax over the T positions
    "transpose_then_last_dim": """
        score = nn.Linear(8, 1)

        def pool(h, b, t):
            return score(h.view(b, t, 8)).transpose(1, 2).softmax(-1)
        """,
    # two tensors added: broadcasting may stretch the size-one dim
    "added_to_a_tensor": """
        score = nn.Linear(8, 1)

        def pool(h, bias):
            return (score(h) + bias).softmax(-1)
        """,
    # the method form of a product with a tensor broadcasts too
    "method_mul_by_a_tensor": """
        score = nn.Linear(8, 1)

        def pool(h, mask):
            return score(h).mul(mask).softmax(dim=-1)
        """,
    # unsqueeze(1) on an unknown tensor then a Linear: dim 1 may be the features dim
    "unsqueeze_then_linear": """
        proj = nn.Linear(1, 4)

        def pool(h):
            return proj(h.unsqueeze(1)).softmax(1)
        """,
    # a keepdim reduction without keepdim: the dim is gone
    "sum_without_keepdim": """
        def pool(h):
            return torch.softmax(h.sum(-1), dim=-1)
        """,
    # a Linear(d, 1) rebound before the softmax under the same name to another value
    "rebound_name": """
        score = nn.Linear(8, 1)

        def pool(h, other):
            s = score(h)
            s = other
            return s.softmax(-1)
        """,
    # a 1 in view that is not the softmax's dim
    "view_one_elsewhere": """
        def pool(h, b, t):
            return torch.softmax(h.view(b, 1, t), dim=-1)
        """,
}

CE_BUGS = {
    "functional_on_flat_linear": """
        head = nn.Linear(32, 1)

        def step(x, y):
            logits = head(x.view(x.size(0), -1))
            return F.cross_entropy(logits, y)  # GT763
        """,
    "criterion_attribute": """
        class Clf(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 1)
                self.crit = nn.CrossEntropyLoss()

            def loss(self, x, y):
                out = self.fc(x.reshape(-1, 4))
                return self.crit(out, y)  # GT763
        """,
}

CE_LOOKALIKES = {
    "two_logits": """
        head = nn.Linear(32, 2)

        def step(x, y):
            return F.cross_entropy(head(x.view(x.size(0), -1)), y)
        """,
    # [B, T, 1]: the class dim of a rank-3 input is dim 1 (T), not the last
    "rank_three_output": """
        head = nn.Linear(32, 1)

        def step(x, y, b, t):
            return F.cross_entropy(head(x.view(b, t, 32)), y)
        """,
    "rank_unknown": """
        head = nn.Linear(32, 1)

        def step(x, y):
            return F.cross_entropy(head(x), y)
        """,
}


@pytest.mark.parametrize("name", sorted(SOFTMAX_BUGS))
def test_softmax_bug(name):
    body = SOFTMAX_BUGS[name]
    assert _found(body) == _marked(body)


@pytest.mark.parametrize("name", sorted(SOFTMAX_LOOKALIKES))
def test_softmax_lookalike_silent(name):
    assert _found(SOFTMAX_LOOKALIKES[name]) == []


@pytest.mark.parametrize("name", sorted(CE_BUGS))
def test_cross_entropy_bug(name):
    body = CE_BUGS[name]
    assert _found(body) == _marked(body)


@pytest.mark.parametrize("name", sorted(CE_LOOKALIKES))
def test_cross_entropy_lookalike_silent(name):
    assert _found(CE_LOOKALIKES[name]) == []


def test_comment_and_string_decide_nothing():
    """A comment saying `nn.Linear(8, 1)` or a docstring does not make a size-one dim."""
    assert _found('''
        def pool(h):
            """h comes from nn.Linear(8, 1)."""
            return h.softmax(-1)  # h = nn.Linear(8, 1)(x)
        ''') == []
