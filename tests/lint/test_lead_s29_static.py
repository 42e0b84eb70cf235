"""The lead's static changes of session 29, each as a buggy twin real torch shows the bug on
and a correct look-alike, through the checker and on real torch."""
from __future__ import annotations

import textwrap

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import tempfile
import torch
import torch.distributed as dist
import torch.nn as nn
torch.manual_seed(0)
'''

GROUP = '''
dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0,
                        world_size=1)
try:
    enc_q, enc_k = nn.Linear(4, 3), nn.Linear(4, 3)
    x = torch.randn(6, 4)
    KeyLoss()(enc_q(x), enc_k(x)).backward()
finally:
    dist.destroy_process_group()
'''
GROUP = textwrap.indent(GROUP, " " * 8)

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # GT611, the gathered buffers bound to a NEW name and the local tensor never read again:
    # the key encoder gets no gradient (gloo, one rank). Look-alike: a name made from the local
    # tensor before the gather is read after it, so the keys keep a path
    "all-gather-buffers-under-a-new-name": (Shape("""
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                local = k * 1.0
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                everything = torch.cat(bufs)
                return (q @ everything.T).logsumexp(1).mean() + (q * local).mean()
        """ + GROUP, "GT611", holds="enc_k.weight.grad is not None"), Shape("""
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                everything = torch.cat(bufs)
                return (q @ everything.T).logsumexp(1).mean()
        """ + GROUP, "GT611", 5,
        holds="enc_k.weight.grad is None and enc_q.weight.grad is not None")),
    # the same, the new name read next to the local tensor: silent
    "all-gather-new-name-beside-local": (Shape("""
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                everything = torch.cat(bufs)
                return (q @ everything.T).logsumexp(1).mean() + (q * k).mean()
        """ + GROUP, "GT611", holds="enc_k.weight.grad is not None"), Shape("""
        class KeyLoss(nn.Module):
            def forward(self, q, k):
                bufs = [torch.empty_like(k) for _ in range(dist.get_world_size())]
                dist.all_gather(bufs, k)
                gathered = torch.stack(bufs).flatten(0, 1)
                logits = q @ gathered.T
                return logits.logsumexp(1).mean()
        """ + GROUP, "GT611", 5, holds="enc_k.weight.grad is None")),
}

GPT = """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)

    def configure_optimizers(self, lr):
        return torch.optim.AdamW(self.parameters(), lr=lr)
"""
GPT = textwrap.indent(GPT, " " * 8)

BUILT_BY_METHOD: dict[str, tuple[Shape, Shape]] = {
    # GT404, the optimizer a model's own method builds (nanoGPT's configure_optimizers), then
    # the model made again: the new model's weights never move. Look-alike: only moved
    "optimizer-from-a-model-method": (Shape(GPT + """
        model = Net()
        optimizer = model.configure_optimizers(0.1)
        model = model.to("cpu")
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        """, "GT404", holds="not torch.equal(before, model.fc.weight)"), Shape(GPT + """
        model = Net()
        optimizer = model.configure_optimizers(0.1)
        model = Net()
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        """, "GT404", 14, holds="torch.equal(before, model.fc.weight)")),
    # the same, the optimizer built again from the new model: silent, the weights move
    "optimizer-from-a-model-method-rebuilt": (Shape(GPT + """
        model = Net()
        optimizer = model.configure_optimizers(0.1)
        model = Net()
        optimizer = model.configure_optimizers(0.1)
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        """, "GT404", holds="not torch.equal(before, model.fc.weight)"), Shape(GPT + """
        model = Net()
        optimizer = model.configure_optimizers(0.1)
        if True:
            model = Net()
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """, "GT404", 15, holds="torch.equal(before, model.fc.weight)")),
}

BUILT_BY_METHOD["model-made-in-branches-then-again"] = (Shape(GPT + """
        scratch = True
        if scratch:
            model = Net()
        else:
            model = torch.load("m.pt")
        optimizer = model.configure_optimizers(0.1)
        if scratch:
            model = model.to("cpu")
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        """, "GT404", holds="not torch.equal(before, model.fc.weight)"), Shape(GPT + """
        scratch = True
        if scratch:
            model = Net()
        else:
            model = torch.load("m.pt")
        optimizer = model.configure_optimizers(0.1)
        model = Net()
        before = model.fc.weight.detach().clone()
        for _ in range(3):
            model(torch.randn(8, 4)).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        """, "GT404", 18, holds="torch.equal(before, model.fc.weight)"))
SHAPES.update(BUILT_BY_METHOD)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
