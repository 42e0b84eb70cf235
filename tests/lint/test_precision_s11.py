"""Shapes that fired wrongly on the projects of docs/triage/unseen11.md (session 11: pix2pixHD,
MPL-pytorch, NAFNet, swa_gaussian, Co-teaching; and of the 20 more projects: MUNIT,
diffusion_policy, style-based-gan-pytorch), each in another spelling than the project's and next to a
buggy twin that is still reported. Every snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = """
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
torch.manual_seed(0)
"""
TWICE = (RuntimeError, "backward through the graph a second time")
LEAF_VIEW = (RuntimeError, "a view of a leaf Variable that requires grad")
NO_GRAD = (RuntimeError, "does not require grad")
BACKBONE = """
class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.fc = nn.Linear(8, 3)
    def forward(self, x):
        return self.fc(torch.relu(self.body(x)))
"""

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

CO = """
def swap_small_loss(ya, yb, t, keep=2):
    pa = F.cross_entropy(ya, t, reduction="none").detach().argsort()[:keep]
    pb = F.cross_entropy(yb, t, reduction="none").detach().argsort()[:keep]
    return F.cross_entropy(ya[pb], t[pb]), F.cross_entropy(yb[pa], t[pa])
def co_train(net_a, net_b, pair_loss, batches):
    opt_a = torch.optim.SGD(net_a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(net_b.parameters(), lr=0.1)
    for x, t in batches:
        out_a = net_a(x)
        out_b = net_b(x)
        la, lb = pair_loss(out_a, out_b, t)
        opt_a.zero_grad()
        la.backward()
        opt_a.step()
        opt_b.zero_grad()
        ({second}).backward()
        opt_b.step()
na, nb = nn.Linear(4, 3), nn.Linear(4, 3)
co_train(na, nb, swap_small_loss, [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(2)])
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
    # Co-teaching: `loss_1, loss_2, ... = loss_coteaching(logits1, logits2, labels, ...)` (from
    # another file), each loss from one network's logits, each network stepped by its own
    # optimizer; here the pair loss is handed in as an argument. Twin: the second backward
    # also runs through the first loss, whose graph is freed (raises)
    "losses-unpacked-from-a-pair-loss-per-network": (
        Shape(CO.format(second="lb"), "GT509", holds="nb.weight.grad is not None"),
        Shape(CO.format(second="lb + 0.5 * la"), "GT509", 13, raises=TWICE)),
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
    # MUNIT's `load_inception`: `model.fc = nn.Linear(...)`, `model.load_state_dict(sd)`,
    # then every parameter frozen: a fixed scorer with its trained head, not a new head frozen
    # by mistake. Twin: the checkpoint is loaded first, the new head after it, then all is
    # frozen and the head is trained (raises)
    "head-replaced-then-checkpoint-loaded-then-frozen": (Shape(BACKBONE + """
def frozen_scorer(weights, n_out):
    net = Backbone()
    net.fc = nn.Linear(8, n_out)
    net.load_state_dict(weights)
    for p in net.parameters():
        p.requires_grad = False
    return net
trained = Backbone()
trained.fc = nn.Linear(8, 5)
scorer = frozen_scorer(trained.state_dict(), 5)
""", "GT408", holds="torch.equal(scorer.fc.weight, trained.fc.weight)"), Shape(BACKBONE + """
def finetune_head(weights, n_out, x):
    net = Backbone()
    net.load_state_dict(weights)
    net.fc = nn.Linear(8, n_out)
    for p in net.parameters():
        p.requires_grad = False
    opt = torch.optim.SGD(net.fc.parameters(), lr=0.1)
    net(x).sum().backward()
    opt.step()
finetune_head(Backbone().state_dict(), 5, torch.randn(2, 4))
""", "GT408", 13, raises=NO_GRAD)),
    # diffusion_policy's BET `get_latents`: `detached = tuple(x.detach() for x in latent)`, then
    # `latents.append(torch.cat(detached, dim=-1))`: the generator detaches every part. Twin:
    # the generator scales the parts, and every batch's graph stays in the list
    "parts-detached-in-a-generator-then-collected": (Shape("""
        def gather_codes(encoder, batches):
            codes = []
            for x in batches:
                parts = encoder(x).chunk(2, dim=-1)
                frozen = tuple(p.detach() for p in parts)
                codes.append(torch.cat(frozen, dim=-1))
            return torch.cat(codes)
        codes = gather_codes(nn.Linear(4, 6), [torch.randn(2, 4) for _ in range(3)])
        """, "GT505", holds="codes.grad_fn is None"), Shape("""
        def gather_codes(encoder, batches):
            codes = []
            for x in batches:
                parts = encoder(x).chunk(2, dim=-1)
                scaled = tuple(p * 0.5 for p in parts)
                codes.append(torch.cat(scaled, dim=-1))
            return torch.cat(codes)
        codes = gather_codes(nn.Linear(4, 6), [torch.randn(2, 4) for _ in range(3)])
        """, "GT505", 6, holds="codes.grad_fn is not None")),
    # style-based-gan-pytorch's LPIPS `DistModel.set_input`: `self.input_ref = data['ref']`, then
    # `self.var_ref = Variable(self.input_ref, requires_grad=True)`: the batch, made to require
    # grad on every call, not a learnable tensor. Twin: a method makes a learnable scale from
    # a constant as a plain attribute; it never reaches `parameters()`
    "batch-input-made-to-require-grad-per-call": (Shape("""
        class PairJudge(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
            def set_input(self, batch):
                self.x_ref = batch["ref"].float()
                self.var_ref = Variable(self.x_ref, requires_grad=True)
            def forward(self):
                return self.score(self.var_ref).sum()
        judge = PairJudge()
        judge.set_input({"ref": torch.randn(3, 4)})
        judge().backward()
        """, "GT402", holds="judge.var_ref.grad is not None"), Shape("""
        class PairJudge(nn.Module):
            def __init__(self):
                super().__init__()
                self.score = nn.Linear(4, 1)
            def set_scale(self, init):
                self.gain = Variable(torch.full((4,), init), requires_grad=True)
            def forward(self, x):
                return self.score(x * self.gain).sum()
        judge = PairJudge()
        judge.set_scale(2.0)
        judge(torch.randn(3, 4)).backward()
        """, "GT402", 6, holds="all(p is not judge.gain for p in judge.parameters())")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_trains(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_fails(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
