"""Shapes from the projects of docs/triage/unseen47b.md (session 47) and the danielzgsilva
GT766 left by unseen46b, each in another spelling than the project's and next to a buggy twin
that is still reported; all run on real torch."""
from __future__ import annotations

import textwrap

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import tempfile
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

FEATURES = """
    class Features(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)
            self.maps = {{}}
        def forward(self, x):
            self.maps = {{}}
            self.maps["c1"] = self.conv(x)
            return x
    def style_loss(a, b):
        return sum(F.mse_loss(a[k], b[k]) for k in a)
    def synthesize(model, target, steps=3):
        img = torch.rand(1, 3, 8, 8, requires_grad=True)
        opt = torch.optim.Adam([img], lr=0.1)
        model(target)
        target_maps = model.maps
        for _ in range(steps):
            opt.zero_grad()
            {call}
            img_maps = model.maps
            loss = style_loss(img_maps, target_maps)
            loss.backward(retain_graph=True)
            opt.step()
        return loss
    loss = synthesize(Features(), torch.rand(1, 3, 8, 8))
    """

DDP = """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    dist.init_process_group("gloo", init_method="file://" + tempfile.mktemp(), rank=0,
                            world_size=1)
    calls = []
    def count(state, bucket):
        calls.append(1)
        fut = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut
    def run_epoch(model, batches, opt, train):
        model.train(train)
        forward_model = model
        if {test}isinstance(model, DistributedDataParallel):
            forward_model = model.module
        for x, y in batches:
            loss = F.mse_loss(forward_model(x), y)
            if train:
                loss.backward()
                opt.step()
                opt.zero_grad()
    ddp = DistributedDataParallel(nn.Linear(3, 1))
    ddp.register_comm_hook(None, count)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)]
    run_epoch(ddp, batches, opt, True)
    run_epoch(ddp, batches, opt, False)
    dist.destroy_process_group()
    """

LAYERS = """
    class TransformNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = [nn.Linear(4, 4) for _ in range(3)]
            self.net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))
        def forward(self, x):
            {body}
    net = TransformNet()
    net(torch.randn(2, 4)).sum().backward()
    """

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # Duanqihuai/Neural-Texture-Synthesis (Synthesis.py): a VGG whose forward sets
    # `self.features_maps = dict()` anew; `model(target); target_features = model.features_maps`
    # and in the loop `model(syn_img); syn_features = model.features_maps`: two inputs' features
    # (NOTE [value computed twice]). Twin: both read after the one call (the loss is 0)
    "attribute-set-anew-by-each-forward": (
        Shape(FEATURES.format(call="model(img)"), "GT120", holds="loss.item() > 0"),
        Shape(FEATURES.format(call="pass"), "GT120", line=20, holds="loss.item() == 0")),
    # Gonglz/pems-gnn-traffic-forecasting (model/train_sampler.py): `forward_model =
    # model.module` only `if not train and isinstance(model, DDP)`, the backward only `if
    # train:` (NOTE [arms of one flag]). Twin: the alias bound whatever `train` is (reported;
    # DDP's communication hook never runs)
    "ddp-unwrapped-only-for-evaluation": (
        Shape(DDP.format(test="not train and "), "GT453", holds="len(calls) == 2"),
        Shape(DDP.format(test=""), "GT453", line=17, holds="len(calls) == 0")),
    # b06b01073/perceptual-losses-for-real-time-style-transfer (model.py): `self.res_blocks =
    # [ResBlock(...) for _ in range(5)]` never read again (the Sequential builds its own):
    # registering them would add weights that never get a gradient (NOTE [unused layers]).
    # Twin: forward runs the list (reported; its weights are not in `parameters()`)
    "layer-list-never-read": (
        Shape(LAYERS.format(body="return self.net(x)"), "GT401",
              holds="all(p.grad is not None for p in net.parameters())"),
        Shape(LAYERS.format(body="for b in self.blocks:\n                x = b(x)\n"
                            "            return self.net(x)"), "GT401", line=4,
              holds="not any(p is net.blocks[0].weight for p in net.parameters())")),
    # danielzgsilva/MonoDepthAttacks (attacks/pgd.py, unseen46b's left GT766): `grad =
    # _adv.grad` after a plain `cost.backward()`, then `grad / (torch.sqrt(torch.sum(grad *
    # grad)) + 10e-8)`: the gradient holds no graph (NOTE [gradient without a graph]). Twin:
    # `backward(create_graph=True)` and the norm backpropagated (NaN at a zero gradient)
    "normalised-gradient-of-a-plain-backward": (Shape("""
        class Step(nn.Module):
            def __init__(self, model, alpha=0.1):
                super().__init__()
                self.model = model
                self.alpha = alpha
            def forward(self, x, y):
                x = x.clone().detach().requires_grad_(True)
                F.mse_loss(self.model(x), y).backward()
                grad = x.grad
                grad = grad / (torch.sqrt(torch.sum(grad * grad, dim=1, keepdim=True)) + 1e-8)
                return (x + self.alpha * grad).detach()
        model = nn.Linear(3, 1)
        with torch.no_grad():
            model.weight.zero_()
        adv = Step(model)(torch.randn(4, 3), torch.randn(4, 1))
        """, "GT766", holds="bool(torch.isfinite(adv).all())"), Shape("""
        def penalty(model, x):
            x = x.clone().detach().requires_grad_(True)
            model(x).sum().backward(create_graph=True)
            grad = x.grad
            norm = torch.sqrt(torch.sum(grad * grad, dim=1)) + 1e-8
            model.zero_grad()
            norm.mean().backward()
            return model.weight.grad
        model = nn.Linear(3, 1)
        with torch.no_grad():
            model.weight.zero_()
        g = penalty(model, torch.randn(4, 3))
        """, "GT766", line=5, holds="bool(torch.isnan(g).any())")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_silent_look_alike_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])


FROZEN = """
    import torch
    import torch.nn as nn
    class Backproject(nn.Module):
        def __init__(self):
            super().__init__()
            self.ones = nn.Parameter(torch.ones(2, 1, 4){kw}).to(torch.float64)
    """


@pytest.mark.parametrize("kw, frozen", [(", requires_grad=False", True), ("", False)])
def test_moved_frozen_parameter_message(kw: str, frozen: bool) -> None:
    """neetmehta/monodepth2-from-scratch (loss/loss.py, unseen46b's debatable GT403):
    `nn.Parameter(torch.ones(...), requires_grad=False).to(device)` is a leaf that no optimizer
    rejects; the finding stays (not registered: `state_dict()` misses it, the module's `.to()`
    does not move it) and says so. Twin: a trainable one (the optimizer's error is said)."""
    from gradtrace.lint import check_source
    found = [f for f in check_source(textwrap.dedent(FROZEN.format(kw=kw)).lstrip("\n"), "m.py",
                                     select=["GT403"])]
    assert [f.line for f in found] == [6]
    assert ("state_dict()" in found[0].message) == frozen
    assert ("can't optimize a non-leaf Tensor" in found[0].message) == (not frozen)
    env: dict = {}
    exec(textwrap.dedent(FROZEN.format(kw=kw)).lstrip("\n"), env)
    m = env["Backproject"]()
    assert "ones" not in m.state_dict() and m.ones.is_leaf == frozen
    m.float()
    assert m.ones.dtype == torch.float64
    if not frozen:
        with pytest.raises(ValueError, match="non-leaf"):
            torch.optim.SGD([m.ones], lr=0.1)
