"""Session 39 (prec39): rules tightened at the assumption their false alarms on unseen code
broke (docs/triage/prec39.md). Each fact has a silent look-alike and a buggy twin that is still
reported; every snippet runs on real torch."""
from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


def _write(root: Path, name: str, text: str) -> Path:
    p = root / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def _found(path: Path, *codes: str) -> list[tuple[str, int]]:
    from gradtrace.lint import check_paths
    from gradtrace.lint.config import Settings
    got = check_paths([str(path)], Settings()).findings
    return sorted((f.code, f.line) for f in got if f.code in codes)


# -- GT757: the op whose NaNs are filtered is on the graph (NOTE [filtered op off the graph]) ---
# A graph's degree normalisation `torch.pow(deg, -0.5)` with `deg` summed from an adjacency
# matrix the loader gives is data: the inf of an isolated node is zeroed and no gradient ever
# goes through the power (RecStudio's shape, with DGL's degree counts). The twin learns the
# adjacency: the same lines make the parameter's gradient NaN.

_DATA_DEGREES = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def train(model, batches, opt):
    for x, adj, y in batches:
        deg = adj.sum(1)
        norm = torch.pow(deg, -0.5)
        norm[torch.isinf(norm)] = 0.0
        out = model(x * norm[:, None])
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    adj = torch.ones(6, 6)
    adj[0] = 0.0
    batches = [(torch.randn(6, 4), adj, torch.randint(0, 3, (6,)))]
    train(model, batches, torch.optim.SGD(model.parameters(), lr=0.1))
    ok = all(torch.isfinite(p).all() for p in model.parameters())
'''

_LEARNED_DEGREES = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class LearnedGraph(nn.Module):
    def __init__(self, n, d_in, d_out):
        super().__init__()
        self.adj_logits = nn.Parameter(torch.zeros(n, n))
        self.lin = nn.Linear(d_in, d_out)

    def forward(self, x, mask):
        adj = torch.relu(self.adj_logits) * mask
        deg = adj.sum(1)
        norm = torch.pow(deg, -0.5)
        norm[torch.isinf(norm)] = 0.0
        return self.lin(x * norm[:, None])


if __name__ == "__main__":
    torch.manual_seed(0)
    model = LearnedGraph(6, 4, 3)
    with torch.no_grad():
        model.adj_logits.fill_(1.0)
    mask = torch.ones(6, 6)
    mask[0] = 0.0
    loss = F.cross_entropy(model(torch.randn(6, 4), mask), torch.randint(0, 3, (6,)))
    loss.backward()
    ok = bool(torch.isfinite(model.adj_logits.grad).all())
'''

_DATA_DENOMINATOR = '''
import torch
import torch.nn as nn


def train(model, batches, opt):
    for x, mask in batches:
        e = torch.exp(model(x))
        mean = (mask * e).sum(1) / mask.sum(1)
        loss = -torch.log(mean[~torch.isnan(mean)]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    mask = torch.ones(5, 3)
    mask[0] = 0.0
    train(model, [(torch.randn(5, 4), mask)], torch.optim.SGD(model.parameters(), lr=0.1))
    ok = all(torch.isfinite(p).all() for p in model.parameters())
'''


def test_degree_normalisation_of_loaded_adjacency_is_silent(tmp_path):
    p = _write(tmp_path, "gcn_data.py", _DATA_DEGREES)
    assert _found(p, "GT757") == []
    assert runpy.run_path(str(p), run_name="__main__")["ok"] is True


def test_degree_normalisation_of_learned_adjacency_is_reported(tmp_path):
    p = _write(tmp_path, "gcn_learned.py", _LEARNED_DEGREES)
    assert _found(p, "GT757") == [("GT757", 15)]
    assert runpy.run_path(str(p), run_name="__main__")["ok"] is False


def test_live_numerator_over_data_denominator_is_reported(tmp_path):
    p = _write(tmp_path, "masked_mean.py", _DATA_DENOMINATOR)
    assert _found(p, "GT757") == [("GT757", 8)]
    assert runpy.run_path(str(p), run_name="__main__")["ok"] is False


# -- GT506: a callable made by a closure factory (NOTE [closure made by a factory]) ------------
# `d_theta = get_denoiser(self.net)` holds the factory's nested `x0_from_xt`: calling it runs
# that body, so what it returns is read there, not guessed from the name's spelling. The
# self-conditioning it returns is detached: the guidance loop's backward on each pass frees
# only that pass's graph (protpardelle's sampler). The twin returns it live: the second pass
# runs into the first pass's freed graph.

_CLOSURE_DETACHED = '''
import torch
import torch.nn as nn


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 8)

    def guided_sample(self, xt, target, steps=3):
        def get_denoiser(net):
            def x0_from_xt(x, cond):
                x0 = net(x + cond)
                return x0, x0.detach()
            return x0_from_xt

        d_theta = get_denoiser(self.net)
        cond = torch.zeros_like(xt)
        for _ in range(steps):
            xt = xt.detach().requires_grad_(True)
            x0, cond = d_theta(xt, cond)
            loss = ((x0 - target) ** 2).sum()
            loss.backward()
            xt = xt - 0.1 * xt.grad
        return xt


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        Denoiser().guided_sample(torch.randn(2, 8), torch.randn(2, 8))
        ok = True
    except RuntimeError:
        ok = False
'''

_CLOSURE_LIVE = _CLOSURE_DETACHED.replace("return x0, x0.detach()", "return x0, x0")


def test_closure_returning_detached_state_is_silent(tmp_path):
    p = _write(tmp_path, "sampler.py", _CLOSURE_DETACHED)
    assert _found(p, "GT506") == []
    assert runpy.run_path(str(p), run_name="__main__")["ok"] is True


def test_closure_returning_live_state_is_reported(tmp_path):
    p = _write(tmp_path, "sampler_live.py", _CLOSURE_LIVE)
    assert _found(p, "GT506") == [("GT506", 21)]
    assert runpy.run_path(str(p), run_name="__main__")["ok"] is False
