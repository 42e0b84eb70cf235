"""static27a (issue 13 parts 2-3): mechanisms from the graph_breaks, grad_mode, graph_lifetime
and distributed misses, each with a silent look-alike that runs and buggy twins in other
spellings (a script, a function, a method), reported on the line a maintainer changes, run on
real torch."""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

SHAPES: dict[str, tuple[Shape, list[Shape]]] = {
    # GT221, mechanism: a tensor created under inference_mode (an inference tensor) updated in
    # place after the block; a new tensor (`t = t / n`) or a Python number is fine
    "inference-tensor-updated-in-place-after-the-block": (Shape("""
        def score(net, pairs):
            err, hits = 0, 0
            with torch.inference_mode():
                for x, y in pairs:
                    out = net(x)
                    err += F.mse_loss(out, y)
                    hits += (out - y).abs().lt(0.5).sum().item()
            err = err / len(pairs)
            hits /= len(pairs)
            return err, hits

        net = nn.Linear(3, 1)
        err, hits = score(net, [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)])
        """, "GT221", holds="not err.requires_grad"), [Shape("""
        net = nn.Linear(3, 1)
        crit = nn.L1Loss()
        running = 0.0
        with torch.inference_mode():
            for _ in range(3):
                running += crit(net(torch.randn(4, 3)), torch.zeros(4, 1))
        running /= 3
        """, "GT221", 7, "Inplace update to inference tensor"), Shape("""
        class Scorer:
            def __init__(self, net):
                self.net = net

            @torch.inference_mode()
            def logits(self, x):
                return self.net(x) * 2.0

        def rank(scorer, x):
            scores = scorer.logits(x)
            scores.clamp_(min=0.0)
            return scores

        rank(Scorer(nn.Linear(3, 2)), torch.randn(4, 3))
        """, "GT221", 11, "Inplace update to inference tensor"), Shape("""
        def masks(seg, images):
            with torch.inference_mode():
                prob = torch.sigmoid(seg(images))
            prob[prob < 0.5] = 0.0
            return prob

        masks(nn.Conv2d(3, 1, 1), torch.rand(1, 3, 4, 4))
        """, "GT221", 4, "Inplace update to inference tensor")]),
    # GT601, mechanism: the later loss feeds the stepped model's output, undetached, into the
    # model its own optimizer trains (a GAN's discriminator loss built on `G(z)` before
    # `opt_g.step()`): reported where it enters that loss, the fix (`.detach()`); with the
    # output detached there the step order is fine
    "later-loss-reads-stepped-model-output-undetached": (Shape("""
        gen = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 3))
        critic = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1))
        opt_gen = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_critic = torch.optim.SGD(critic.parameters(), lr=0.1)
        sample = gen(torch.randn(5, 2))
        gen_loss = -critic(sample).mean()
        critic_loss = critic(sample.detach()).mean() - critic(torch.randn(5, 3)).mean()
        opt_gen.zero_grad()
        gen_loss.backward(retain_graph=True)
        opt_gen.step()
        opt_critic.zero_grad()
        critic_loss.backward()
        opt_critic.step()
        """, "GT601", holds="critic[0].weight.grad is not None"), [Shape("""
        gen = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 3))
        critic = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 1))
        opt_gen = torch.optim.SGD(gen.parameters(), lr=0.1)
        opt_critic = torch.optim.SGD(critic.parameters(), lr=0.1)
        sample = gen(torch.randn(5, 2))
        gen_loss = -critic(sample).mean()
        critic_loss = critic(sample).mean() - critic(torch.randn(5, 3)).mean()
        opt_gen.zero_grad()
        gen_loss.backward(retain_graph=True)
        opt_gen.step()
        opt_critic.zero_grad()
        critic_loss.backward()
        opt_critic.step()
        """, "GT601", 7, "modified by an inplace operation"), Shape("""
        def adversarial_step(decoder, judge, opt_dec, opt_judge, z, real):
            made = decoder(z)
            dec_loss = F.softplus(-judge(made)).mean()
            judge_out = judge(made)
            judge_loss = F.softplus(judge_out).mean() + F.softplus(-judge(real)).mean()
            dec_loss.backward(retain_graph=True)
            opt_dec.step()
            judge_loss.backward()
            opt_judge.step()

        decoder = nn.Sequential(nn.Linear(2, 6), nn.ELU(), nn.Linear(6, 3))
        judge = nn.Sequential(nn.Linear(3, 6), nn.ELU(), nn.Linear(6, 1))
        opt_dec = torch.optim.Adam(decoder.parameters())
        opt_judge = torch.optim.Adam(judge.parameters())
        adversarial_step(decoder, judge, opt_dec, opt_judge, torch.randn(4, 2), torch.randn(4, 3))
        """, "GT601", 4, "modified by an inplace operation")]),
    # GT509, mechanism: after `backward()` freed the graph and an optimizer stepped, a second
    # loss is computed from a forward output of before (Sophia's sampled Hessian loss on the
    # old logits): reported on that stale read (the fix: run the forward again there);
    # running the forward again after the step is correct
    "second-loss-reads-forward-output-after-backward-and-step": (Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.randn(6, 4)
        for it in range(2):
            scores = net(x)
            loss = scores.pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            scores = net(x)
            extra = F.cross_entropy(scores, scores.argmax(1))
            extra.backward()
        """, "GT509", holds="net[0].weight.grad is not None"), [Shape("""
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.randn(6, 4)
        scores = net(x)
        loss = scores.pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        extra = F.cross_entropy(scores, scores.argmax(1))
        extra.backward()
        """, "GT509", 9, "backward through the graph a second time"), Shape("""
        def refine(encoder, head, opt, batch):
            codes = encoder(batch)
            recon = head(codes).sub(batch).pow(2).mean()
            recon.backward()
            opt.step()
            opt.zero_grad()
            sparsity = codes.abs().mean()
            sparsity.backward()

        encoder, head = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)), nn.Linear(2, 4)
        opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()])
        refine(encoder, head, opt, torch.randn(5, 4))
        """, "GT509", 7, "backward through the graph a second time")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_look_alike_is_silent_and_runs(name: str) -> None:
    good, _ = SHAPES[name]
    assert _found(good) == []
    _run(good)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twins_are_reported_and_fail(name: str) -> None:
    _, bads = SHAPES[name]
    assert len(bads) >= 2
    for bad in bads:
        assert _found(bad) == [(bad.line, bad.code)], bad.src
        _run(bad)


# GT614, mechanism: a parameter or a layer assigned into a model after DistributedDataParallel
# hooked its parameters. A new layer leaves the reducer waiting for the old one's gradients
# (raises on a one-process gloo group); a new nn.Parameter is never averaged across ranks
# (silent drift: shown with two processes by
# tests/realworld/cases/distributed/ddp_conv_weight_replaced_after_wrapping.py, 0.83 vs 0.0
# for ddp_conv_weight_replaced_before_wrapping_ok.py), so one process only checks it runs.
# Look-alikes: replaced before wrapping, copied into the existing parameter, `.data` set.
from tests.lint.shape_runner import Shape as DShape, judge  # noqa: E402
from tests.lint.test_shapes_distributed import PRELUDE as DDP_PRELUDE, REDUCTION  # noqa: E402

TWO_LAYERS = """
class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.relu(self.stem(x)))
"""
PAIR = """
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 2)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        return self.a(x), self.b(x)
"""
DDP_SHAPES: dict[str, DShape] = {
    "replaced-before-wrap-or-copied-in": DShape(TWO_LAYERS + """
net = Tower()
net.out = nn.Linear(4, 1)
ddp = DDP(net)
with torch.no_grad():
    ddp.module.stem.weight.copy_(torch.eye(4))
ddp.module.out.bias.data = torch.zeros(1)
for _ in range(2):
    ddp(torch.randn(3, 4)).pow(2).mean().backward()
""", "GT614", holds="net.out.weight.grad is not None"),
    "helper-swaps-layer-through-wrapper": DShape(TWO_LAYERS + """
def new_head(wrapped, n):
    wrapped.module.out = nn.Linear(4, n)

ddp = DDP(Tower())
new_head(ddp, 1)
for _ in range(2):
    ddp(torch.randn(3, 4)).pow(2).mean().backward()
""", "GT614", 11, REDUCTION),
    "trainer-method-swaps-parameter": DShape(TWO_LAYERS + """
class Trainer:
    def __init__(self, net):
        self.model = DistributedDataParallel(net)

    def reinit(self):
        self.model.module.stem.weight = nn.Parameter(torch.eye(4))

t = Trainer(Tower())
t.reinit()
t.model(torch.randn(3, 4)).sum().backward()
""", "GT614", 15),
    "wrapped-name-given-new-layer": DShape(TWO_LAYERS + """
def build():
    core = Tower()
    model = DDP(core)
    core.stem = nn.Linear(4, 4)
    for _ in range(2):
        model(torch.randn(3, 4)).pow(2).mean().backward()

build()
""", "GT614", 13, REDUCTION),
    # GT459 widened, mechanism: static_graph=True does not cover an output the loss leaves
    # out (pytorch#79171): reported on the wrapper; every output in the loss is fine
    "static-graph-every-output-in-loss": DShape(PAIR + """
def fit(steps):
    model = DDP(Pair(), static_graph=True)
    for _ in range(steps):
        left, right = model(torch.randn(3, 4))
        (left.sum() + right.pow(2).mean()).backward()

fit(3)
""", "GT459"),
    "static-graph-second-output-dropped": DShape(PAIR + """
def fit(steps):
    model = DDP(Pair(), static_graph=True)
    for _ in range(steps):
        left, right = model(torch.randn(3, 4))
        left.sum().backward()

fit(3)
""", "GT459", 11, REDUCTION),
    "static-graph-script-drops-output": DShape(PAIR + """
net = DistributedDataParallel(Pair().float(), static_graph=True)
for step in range(3):
    main_out, aux_out = net(torch.randn(2, 4))
    F.mse_loss(main_out, torch.zeros(2, 2)).backward()
""", "GT459", 10, REDUCTION),
}


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    dist = pytest.importorskip("torch.distributed")
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("name", sorted(DDP_SHAPES))
def test_ddp_shape_is_judged_as_torch_behaves(name: str, group: None) -> None:
    judge(DDP_PRELUDE, DDP_SHAPES[name])


# GT615, mechanism: hand-written data parallelism (a process group, no DDP) whose
# gradient-averaging helper is defined but never called: each rank steps on its own gradients.
# Proven with two gloo processes by tests/realworld/cases/distributed/
# dist_training_gradients_never_averaged_across_ranks.py (0.13 apart) and its _ok twin (0.0);
# here the verdicts (a method of a trainer, a module-level helper with a script loop; silent
# when the helper is called, or handed over as a callback).
from gradtrace.lint import check_source  # noqa: E402

UNSYNCED = {
    "script-loop-never-calls-helper": ("""
import torch
import torch.distributed as dist

def sync_grads(params):
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad.data)
            p.grad.data.div_(dist.get_world_size())

dist.init_process_group("gloo")
net = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(net.parameters())
for step in range(10):
    opt.zero_grad()
    net(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
""", 17),
    "worker-method-never-called": ("""
import torch
from torch import distributed

class Worker:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt

    def _allreduce(self):
        for p in self.model.parameters():
            distributed.all_reduce(p.grad)
        for p in self.model.parameters():
            p.grad /= distributed.get_world_size()

    def update(self, batch):
        loss = self.model(batch).sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

def launch(rank):
    distributed.init_process_group("nccl", rank=rank, world_size=4)
""", 19),
    "helper-called": ("""
import torch
import torch.distributed as dist

def sync_grads(params):
    for p in params:
        dist.all_reduce(p.grad)

dist.init_process_group("gloo")
net = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(net.parameters())
for step in range(10):
    opt.zero_grad()
    net(torch.randn(8, 4)).pow(2).mean().backward()
    sync_grads(net.parameters())
    opt.step()
""", None),
    "helper-handed-as-hook": ("""
import torch
import torch.distributed as dist

def sync_grads(params):
    for p in params:
        dist.all_reduce(p.grad)

def run(net, opt, x, after_backward=sync_grads):
    dist.init_process_group("gloo")
    opt.zero_grad()
    net(x).sum().backward()
    after_backward(net.parameters())
    opt.step()
""", None),
}


@pytest.mark.parametrize("name", sorted(UNSYNCED))
def test_gradient_averaging_never_called(name: str) -> None:
    src, line = UNSYNCED[name]
    found = [(f.line, f.code) for f in check_source(src.lstrip("\n"), "s.py", select=["GT615"])]
    assert found == ([] if line is None else [(line - 1, "GT615")])
