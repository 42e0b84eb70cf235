"""Shapes that fired wrongly on the projects of docs/triage/unseen29c.md (session 29), each in
another spelling than the project's and next to a buggy twin that is still reported. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from gradtrace.lint import check_source
from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import warnings
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # MedicalZooPytorch (lib/losses3D/BaseClass.py): `loss = 1. - torch.mean(dice)`, then
    # `dice = dice.detach().cpu().numpy()` for logging, `return loss, dice`: the loss's term
    # was read at the return, where `dice` is already the array. Twin: the loss is built from
    # the array
    "loss-term-read-before-the-name-becomes-an-array": (Shape("""
        class SoftDiceLoss(nn.Module):
            def forward(self, probs, target):
                scores = 2 * (probs * target).sum(0) / (probs.sum(0) + target.sum(0) + 1e-6)
                loss = 1. - torch.mean(scores)
                scores = scores.detach().cpu().numpy()
                return loss, scores
        w = torch.ones(3, requires_grad=True)
        loss, scores = SoftDiceLoss()(torch.sigmoid(torch.randn(4, 3) * w), torch.ones(4, 3))
        loss.backward()
        """, "GT103", holds="w.grad is not None"), Shape("""
        class SoftDiceLoss(nn.Module):
            def forward(self, probs, target):
                scores = 2 * (probs * target).sum(0) / (probs.sum(0) + target.sum(0) + 1e-6)
                scores = scores.detach().cpu().numpy()
                loss = 1. - torch.mean(torch.from_numpy(scores))
                return loss, scores
        w = torch.ones(3, requires_grad=True)
        loss, scores = SoftDiceLoss()(torch.sigmoid(torch.randn(4, 3) * w), torch.ones(4, 3))
        loss.backward()
        """, "GT103", line=4, raises=(RuntimeError, "does not require grad"))),
    # GraSP (pruner/GraSP_ImageNet.py): `grad_w = autograd.grad(loss, weights)` (no graph, on
    # purpose), `grad_f = autograd.grad(loss2, weights, create_graph=True)`, then
    # `z += (grad_w[i] * grad_f[i]).sum(); z.backward()`: a Hessian-gradient product, the
    # graph runs through `grad_f`. Twin: the product with a plain tensor: no graph at all
    "hessian-vector-product-with-a-plain-gradient": (Shape("""
        net = nn.Linear(3, 2)
        weights = [net.weight]
        x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
        grad_w = torch.autograd.grad(F.cross_entropy(net(x), y), weights)
        grad_f = torch.autograd.grad(F.cross_entropy(net(x * 2), y), weights, create_graph=True)
        z = 0
        for i in range(len(weights)):
            z += (grad_w[i] * grad_f[i]).sum()
        z.backward()
        """, "GT206", holds="net.weight.grad is not None"), Shape("""
        net = nn.Linear(3, 2)
        weights = [net.weight]
        x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
        grad_w = torch.autograd.grad(F.cross_entropy(net(x), y), weights)
        vec = [torch.ones(2, 3)]
        z = 0
        for i in range(len(weights)):
            z += (grad_w[i] * vec[i]).sum()
        z.backward()
        """, "GT206", line=4, raises=(RuntimeError, "does not require grad"))),
    # ModelsGenesis (pytorch/Genesis_Chest_CT.py): `conf = models_genesis_config()`, a
    # settings class imported from `config`, read inside the loop (`conf.nb_class`); the
    # word `models` made it a model run with a graph. Twin: a callee bound here (a partial of
    # a layer over its input) called with no argument: it runs the layer
    "imported-settings-object-built-with-no-input": (Shape("""
        import sys, types
        sys.modules["genesis_settings"] = types.ModuleType("genesis_settings")
        sys.modules["genesis_settings"].models_genesis_config = type(
            "Settings", (), {"nb_class": 2.0, "lr": 0.1})
        from genesis_settings import models_genesis_config
        conf = models_genesis_config()
        model = nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=conf.lr)
        for _ in range(3):
            gt = torch.ones(4, 2) * conf.nb_class
            loss = ((model(torch.ones(4, 2)) - gt) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT507"), Shape("""
        from functools import partial
        layer = nn.Linear(2, 2)
        target_net = partial(layer, torch.ones(4, 2))
        gt = target_net()
        model = nn.Linear(2, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = ((model(torch.ones(4, 2)) - gt) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """, "GT507", line=4, raises=(RuntimeError, "backward through the graph a second"))),
    # Relation-Shape-CNN (utils/pointnet2_utils.py): `BallQuery.forward` returns
    # `torch.cat([fps_idx.unsqueeze(2), idx], dim=2)` of integer tensors (`torch.cuda.IntTensor`
    # filled by the kernel, `fps_idx: torch.IntTensor`), `backward` returns 4 gradients for 5
    # inputs: an integer output never requires grad, so backward never runs. Twin: the same
    # kernel with a float output: 'returned an incorrect number of gradients'
    "index-kernel-returns-integer-tensors": (Shape("""
        class BallQuery(torch.autograd.Function):
            @staticmethod
            def forward(ctx, radius, nsample, xyz, new_xyz, fps_idx: torch.IntTensor):
                idx = torch.IntTensor(xyz.size(0), new_xyz.size(1), nsample).zero_()
                return torch.cat([fps_idx.unsqueeze(2), idx], dim=2)
            @staticmethod
            def backward(ctx, a=None):
                return None, None, None, None
        xyz = torch.randn(2, 8, 3, requires_grad=True)
        fps = torch.zeros(2, 4, dtype=torch.int32)
        idx = BallQuery.apply(0.1, 3, xyz, xyz[:, :4].contiguous(), fps)
        xyz.gather(1, idx[..., :1].long().expand(-1, -1, 3)).sum().backward()
        """, "GT701", holds="xyz.grad is not None"), Shape("""
        class BallQuery(torch.autograd.Function):
            @staticmethod
            def forward(ctx, radius, nsample, xyz, new_xyz, fps_idx: torch.IntTensor):
                idx = torch.zeros(xyz.size(0), new_xyz.size(1), nsample)
                return torch.cat([fps_idx.unsqueeze(2).float(), idx], dim=2)
            @staticmethod
            def backward(ctx, a=None):
                return None, None, None, None
        xyz = torch.randn(2, 8, 3, requires_grad=True)
        fps = torch.zeros(2, 4, dtype=torch.int32)
        out = BallQuery.apply(0.1, 3, xyz, xyz[:, :4].contiguous(), fps)
        out.sum().backward()
        """, "GT701", line=8, raises=(RuntimeError, "incorrect number of gradients"))),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


# MORAN_v2 (main.py): an unfreeze in a `for` loop over parameters inside a `while` loop;
# GT461 read every enclosing loop's target and crashed (GT002) on the `while`. Twin: the same
# loops around a freeze of part of a model whose BatchNorm then trains under `train()`
WHILE_LOOP = '''
model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Linear(2, 1))
opt = torch.optim.SGD(model[2].parameters(), lr=0.1)
for epoch in range(2):
    i = 0
    while i < 3:
        for p in model[:2].parameters():
            p.requires_grad = False
        model.train()
        loss = model(torch.randn(4, 2)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        i += 1
'''


def test_freeze_inside_a_while_loop_is_checked() -> None:
    found = check_source(PRELUDE + WHILE_LOOP, "shape.py", select=["GT461", "GT002"])
    offset = PRELUDE.count("\n")
    assert [(f.line - offset, f.code) for f in found] == [(9, "GT461")]
    exec(compile(PRELUDE + WHILE_LOOP, "shape.py", "exec"), {})


# FreeAdversarialTraining (main_free.py): `noise_batch = Variable(global_noise[0:n],
# requires_grad=True).cuda()` with `global_noise = torch.zeros(...).cuda()` at module level:
# `.cuda()` of a tensor already on the current CUDA device returns the tensor itself (torch's
# `Tensor.cuda` documentation: "no copy is performed and the original object is returned"),
# so `noise_batch` is the leaf and its `.grad` is filled. Twin: the noise lives on the CPU, the
# move copies: a non-leaf whose `.grad` stays None
FREE_AT = '''
from torch.autograd import Variable
global_noise = torch.zeros(4, 3){move}
model = nn.Linear(3, 2).cuda()
x, y = torch.randn(4, 3).cuda(), torch.tensor([0, 1, 0, 1]).cuda()
for j in range(2):
    noise_batch = Variable(global_noise[0:x.size(0)], requires_grad=True).cuda()
    loss = F.cross_entropy(model(x + noise_batch), y)
    loss.backward()
    global_noise[0:x.size(0)] += noise_batch.grad.sign()
'''


@pytest.mark.parametrize("move,found", [(".cuda()", []), ("", [(7, "GT305")])])
def test_leaf_moved_to_the_device_it_is_on(move: str, found: list) -> None:
    source = PRELUDE + FREE_AT.format(move=move)
    offset = PRELUDE.count("\n")
    assert [(f.line - offset, f.code) for f in check_source(source, "shape.py",
                                                            select=["GT305"])] == found
    if not torch.cuda.is_available():
        pytest.skip("the run needs CUDA")
    if found:
        with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'sign'"):
            exec(compile(source, "shape.py", "exec"), {})
    else:
        exec(compile(source, "shape.py", "exec"), {})
