"""Shapes that fired wrongly on the projects of docs/triage/unseen11.md (session 11: pix2pixHD,
MPL-pytorch, NAFNet, swa_gaussian), each in another spelling than the project's and next to a
buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
torch.manual_seed(0)
"""
TWICE = (RuntimeError, "backward through the graph a second time")
LEAF_VIEW = (RuntimeError, "a view of a leaf Variable that requires grad")

PAIR = """
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.gen = nn.Linear(4, 4)
        self.critic = nn.Linear(4, 1)
        self.names = ("c_fake", "c_true", "g_adv", "g_rec")
    def forward(self, z, real):
        fake = self.gen(z)
        c_fake = self.critic(fake.detach()).mean()
        c_true = -self.critic(real).mean()
        g_adv = -self.critic(fake).mean()
        g_rec = (fake - real).abs().mean()
        return [c_fake, c_true, g_adv, g_rec]
pair = Pair()
opt_gen = torch.optim.Adam(pair.gen.parameters())
opt_critic = torch.optim.Adam(pair.critic.parameters())
for _ in range(2):
    outs = pair(torch.randn(3, 4), torch.randn(3, 4))
    outs = [o * 1.0 for o in outs]
    named = dict(zip(pair.names, outs))
    gen_loss = named["g_adv"] + named.get("g_rec", 0.0)
    critic_loss = {critic}
    opt_gen.zero_grad()
    gen_loss.backward()
    opt_gen.step()
    opt_critic.zero_grad()
    critic_loss.backward()
    opt_critic.step()
"""

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # pix2pixHD: the model returns a list of losses (the discriminator's on a detached fake),
    # the script zips it into a dict, and the G and D losses read different keys, one of them
    # through `.get(key, 0)`; each is stepped by its own optimizer. Twin: the critic loss also
    # reads the generator's entry (through `.get`), whose graph the first backward freed
    "losses-zipped-into-a-dict-read-by-other-keys": (
        Shape(PAIR.replace("{critic}", 'named["c_fake"] + named["c_true"]'), "GT509",
              holds="pair.critic.weight.grad is not None"),
        Shape(PAIR.replace("{critic}", 'named["c_fake"] + named["c_true"] - 0.1 * '
                                       'named.get("g_adv", 0.0)'), "GT509", 24, raises=TWICE)),
    # MPL-pytorch: `if args.finetune: finetune(args, ..., student_model, ...); return` where
    # `finetune` replaces a submodule and builds its own optimizer; the stale optimizer's steps
    # come after the `return`. Twin: no `return`, so the loop steps the old optimizer, which
    # does not hold the new head
    "replacement-in-a-branch-that-returns": (Shape("""
        def polish(model, x):
            model.head = nn.Linear(4, 2)
            tune = torch.optim.SGD(model.parameters(), lr=0.1)
            tune.zero_grad()
            model(x).sum().backward()
            tune.step()
        def fit(x, polish_only):
            net = nn.Sequential()
            net.add_module("body", nn.Linear(4, 4))
            net.add_module("head", nn.Linear(4, 3))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if polish_only:
                polish(net, x)
                return net, opt
            for _ in range(3):
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
            return net, opt
        net, opt = fit(torch.randn(5, 4), False)
        """, "GT404", holds="any(p is net.head.weight for g in opt.param_groups "
                            "for p in g['params'])"), Shape("""
        def polish(model, x):
            model.head = nn.Linear(4, 2)
            tune = torch.optim.SGD(model.parameters(), lr=0.1)
            tune.zero_grad()
            model(x).sum().backward()
            tune.step()
        def fit(x, polish_first):
            net = nn.Sequential()
            net.add_module("body", nn.Linear(4, 4))
            net.add_module("head", nn.Linear(4, 3))
            opt = torch.optim.SGD(net.parameters(), lr=0.1)
            if polish_first:
                polish(net, x)
            for _ in range(3):
                opt.zero_grad()
                net(x).sum().backward()
                opt.step()
            return net, opt
        net, opt = fit(torch.randn(5, 4), True)
        """, "GT404", 13, holds="not any(p is net.head.weight for g in opt.param_groups "
                                "for p in g['params'])")),
    # NAFNet's 3-D SSIM: `conv3d.weight.requires_grad = False`, then
    # `conv3d.weight[0, 0, :, :, :] = kernel`: the flag was cleared first; here a box filter,
    # `requires_grad_(False)`. Twin: the flag is set back to True before the write (raises)
    "layer-weight-frozen-then-written": (Shape("""
        def box_filter(k=3):
            taps = torch.full((k, k), 1.0 / (k * k))
            blur = nn.Conv2d(1, 1, k, padding=k // 2, bias=False)
            blur.weight.requires_grad_(False)
            blur.weight[0, 0] = taps
            return blur
        f = box_filter()
        x = nn.Parameter(torch.randn(1, 1, 5, 5))
        f(x).sum().backward()
        """, "GT302", holds="x.grad is not None"), Shape("""
        def box_filter(k=3):
            taps = torch.full((k, k), 1.0 / (k * k))
            blur = nn.Conv2d(1, 1, k, padding=k // 2, bias=False)
            blur.weight.requires_grad = False
            blur.weight.requires_grad = True
            blur.weight[0, 0] = taps
            return blur
        f = box_filter()
        f(torch.randn(1, 1, 5, 5)).sum().backward()
        """, "GT302", 6, raises=LEAF_VIEW)),
    # swa_gaussian's segmentation `predict`: `pred = get_predictions(output)`, a helper of the
    # file that reads its argument only through `.size()` and `.data` and returns max indices;
    # the list keeps inputs, targets and indices, no graph. Twin: the helper returns the
    # softmax of the live argument, and the list keeps every batch's graph
    "collected-labels-from-a-helper-that-cuts": (Shape("""
        def hard_labels(logits):
            n, k = logits.size()
            probs = logits.data.softmax(1)
            return probs.argmax(1).view(n)
        def collect(model, batches):
            kept = []
            model.eval()
            for x, y in batches:
                out = model(x)
                lab = hard_labels(out)
                kept.append([x, y, lab])
            return kept
        kept = collect(nn.Linear(4, 3), [(torch.randn(2, 4), torch.zeros(2)) for _ in range(3)])
        """, "GT505", holds="all(t[2].grad_fn is None for t in kept)"), Shape("""
        def soft_labels(logits):
            n, k = logits.shape
            return logits.softmax(1).view(n, k)
        def collect(model, batches):
            kept = []
            model.eval()
            for x, y in batches:
                out = model(x)
                lab = soft_labels(out)
                kept.append([x, y, lab])
            return kept
        kept = collect(nn.Linear(4, 3), [(torch.randn(2, 4), torch.zeros(2)) for _ in range(3)])
        """, "GT505", 10, holds="all(t[2].grad_fn is not None for t in kept)")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
