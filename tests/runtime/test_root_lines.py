"""`gradtrace run` names the root cause's line, not the symptom's (issue 13 §2), for mechanisms
seen on held-out real-world bugs: a backward() gradient argument of the wrong shape (where it
was built); a tensor saved for backward and changed in place through another name (the alias
or view line, or the saving op when the write happened inside a library call); gradients
cleared before any optimizer step used them (the step outside the loop, zero_grad() every pass
with a step every N, zero_grad() at an epoch start dropping a partial sum, a step that runs
before a later backward() of the same pass); grad mode turned off
by a decorator (the call of a no-grad helper whose outputs are trained on, the decorator of a
forward); a second backward() at one line through a freed graph (the loop over losses of one
forward, an object built once that keeps a tensor of the graph, a detach helper that hands a
tuple back undetached); an optimizer state loaded before its groups match. A module left out of the
optimizer on purpose (its parameters explicitly removed) is no GT821. Each bug is written in a spelling of its own (a method, a helper, a script) and
has a look-alike that stays silent. Real torch, in-process runs."""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""

# name -> (code, body); the cause line carries `# C`
BUGS = {
    "gradient_built_in_method_after_squeeze": ("GT830", """
class Learner:
    def __init__(self):
        self.q = nn.Linear(4, 2)

    def update(self, obs, target):
        q_sa = self.q(obs).max(1)[0].squeeze()
        err = (target - q_sa).clamp(-1, 1)
        upstream = -err.detach().view(-1, 1)  # C
        q_sa.backward(upstream)

Learner().update(torch.randn(6, 4), torch.randn(6))
"""),
    "grad_outputs_list_for_scalar_losses": ("GT830", """
w = torch.randn(3, requires_grad=True)

def losses_of(x):
    return [(x * w).sum(), (x - w).pow(2).mean()]

parts = losses_of(torch.randn(3))
seeds = [torch.ones(1), torch.ones(1)]  # C
torch.autograd.grad(parts, [w], grad_outputs=seeds)
"""),
    "alias_of_input_added_into_in_method": ("GT602", """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.side, self.mix = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, feats):
        side = self.side(feats)
        acc = feats  # C
        acc += self.mix(feats)
        return side * acc

stem = nn.Linear(4, 4)
hidden = torch.tanh(stem(torch.randn(3, 4)))
Block()(hidden).sum().backward()
"""),
    "row_view_saved_then_base_overwritten": ("GT602", """
enc = nn.Linear(4, 6)
tokens = enc(torch.randn(5, 4)) * 1.0
cls_tok = tokens[0].unsqueeze(0)  # C
energy = cls_tok.pow(2).sum()
tokens[0] = torch.zeros(6)
(energy + tokens.sum()).backward()
"""),
    "library_renormalises_weight_after_use": ("GT602", """
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(6, 4, max_norm=0.5)
        self.proj = nn.Parameter(torch.ones(4, 2))

    def forward(self, idx):
        gram = torch.mm(self.emb.weight, self.proj)  # C
        return gram.sum() + self.emb(idx).sum()

torch.manual_seed(0)
Tied()(torch.tensor([1, 3])).backward()
"""),
    "trainer_steps_once_per_epoch": ("GT827", """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def epoch(self, batches):
        for x, y in batches:
            self.opt.zero_grad()
            F.mse_loss(self.model(x), y).backward()
        self.opt.step()  # C

trainer = Trainer(nn.Linear(3, 1))
for _ in range(2):
    trainer.epoch([(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)])
"""),
    "grads_zeroed_in_place_every_pass_step_every_third": ("GT512", """
net = nn.Linear(3, 1)
opt = torch.optim.Adam(net.parameters())
for i in range(6):
    net.zero_grad(set_to_none=False)  # C
    (net(torch.randn(4, 3)).pow(2).mean() / 3).backward()
    if (i + 1) % 3 == 0:
        opt.step()
"""),
    # the accumulation branch written as a skip: the step is left out on 3 passes of 4
    "step_skipped_unless_accumulated_three_passes": ("GT512", """
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(8):
    optimizer.zero_grad(set_to_none=True)  # C
    F.mse_loss(model(torch.randn(4, 3)), torch.randn(4, 1)).backward()
    if it % 4 != 3:
        continue
    optimizer.step()
"""),
    "epoch_start_clear_drops_partial_sum": ("GT827", """
def fit(model, opt, data, accumulate=3, epochs=2):
    seen = 0
    for epoch in range(epochs):
        opt.zero_grad()  # C
        for x, y in data:
            (F.mse_loss(model(x), y) / accumulate).backward()
            seen += 1
            if seen % accumulate == 0:
                opt.step()
                opt.zero_grad()

model = nn.Linear(3, 1)
fit(model, torch.optim.SGD(model.parameters(), lr=0.1),
    [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)])
"""),
    "no_grad_helper_outputs_trained_on": ("GT201", """
policy = nn.Linear(4, 2)

@torch.no_grad()
def act(obs):
    return torch.log_softmax(policy(obs), -1)

logp = act(torch.randn(3, 4))  # C
loss = -(logp[:, 0] * 1.0).mean()
loss.backward()
"""),
    "no_grad_decorated_forward": ("GT201", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    @torch.no_grad()  # C
    def forward(self, x):
        return self.fc(x)

net = Net()
F.mse_loss(net(torch.randn(2, 4)), torch.zeros(2, 1)).backward()
"""),
    "backward_per_entry_of_loss_dict": ("GT509", """
class Step:
    def __init__(self):
        self.net = nn.Linear(3, 2)

    def run(self, x):
        out = self.net(x)
        losses = {"sq": out.pow(2).mean(), "abs": out.abs().mean()}
        for name, term in losses.items():  # C
            term.backward()

Step().run(torch.randn(4, 3))
"""),
    "distribution_kept_on_self": ("GT507", """
class Agent:
    def __init__(self):
        self.head = nn.Linear(3, 4)
        self.dist = torch.distributions.Categorical(logits=self.head(torch.ones(1, 3)))  # C
        self.opt = torch.optim.SGD(self.head.parameters(), lr=0.1)

    def update(self):
        action = self.dist.sample()
        loss = -self.dist.log_prob(action).sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

agent = Agent()
for _ in range(2):
    agent.update()
"""),
    "aux_head_missing_while_encoder_excluded": ("GT821", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.head, self.aux = nn.Linear(3, 4), nn.Linear(4, 1), nn.Linear(4, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h) + self.aux(h)

net = Net()
skip = set(net.encoder.parameters())
opt = torch.optim.SGD([p for p in net.head.parameters() if p not in skip], lr=0.1)  # C
for _ in range(2):
    opt.zero_grad()
    net(torch.randn(2, 3)).pow(2).mean().backward()
    opt.step()
"""),
    # the scaler steps the optimizer before a second backward and updates after it: the
    # scaler's update() reads no gradient, the second backward's are dropped
    "scaler_step_before_a_second_backward_then_update": ("GT827", """
seg = nn.Linear(3, 2)
opt = torch.optim.SGD(seg.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for _ in range(3):
    opt.zero_grad()
    scaler.scale(F.mse_loss(seg(torch.randn(4, 3)), torch.zeros(4, 2))).backward()
    scaler.step(opt)  # C
    scaler.scale(seg(torch.randn(4, 3)).pow(2).mean()).backward()
    scaler.update()
"""),
    "adaptation_step_before_adversarial_backward": ("GT827", """
class Adapt:
    def __init__(self):
        self.seg, self.disc = nn.Linear(3, 2), nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.seg.parameters(), lr=0.1)
        self.opt_d = torch.optim.SGD(self.disc.parameters(), lr=0.1)

    def step(self, src, tgt):
        self.opt.zero_grad()
        self.opt_d.zero_grad()
        F.mse_loss(self.seg(src), torch.zeros(4, 2)).backward()
        self.opt.step()  # C
        self.disc.requires_grad_(False)
        self.disc(self.seg(tgt)).mean().backward()
        self.disc.requires_grad_(True)
        self.disc(self.seg(tgt).detach()).pow(2).mean().backward()
        self.opt_d.step()

adapt = Adapt()
for _ in range(3):
    adapt.step(torch.randn(4, 3), torch.randn(4, 3))
"""),
    "detach_helper_skips_lstm_state_tuple": ("GT506", """
lstm = nn.LSTM(2, 3)
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)

def keep(state):
    if torch.is_tensor(state):
        return state.detach()
    return state  # C

state = None
for chunk in torch.randn(3, 4, 1, 2):
    out, new_state = lstm(chunk, state)
    opt.zero_grad()
    out.pow(2).mean().backward()
    opt.step()
    state = keep(new_state)
"""),
    "optimizer_state_loaded_before_group_added": ("GT831", """
class Trainer:
    def __init__(self, model, resume=None):
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        if resume is not None:
            self.opt.load_state_dict(resume)  # C
        self.scale = nn.Parameter(torch.ones(1))
        self.opt.add_param_group({"params": [self.scale]})

net = nn.Linear(2, 1)
first = Trainer(net)
Trainer(net, resume=first.opt.state_dict())
"""),
}

LOOKALIKES = {
    # a second-order optimizer reads the gradients of a sampled-label backward through a method
    # of its own (Sophia's update_hessian), after the step of the training loss
    "curvature_backward_read_by_an_optimizer_method": """
class Curvature(torch.optim.SGD):
    @torch.no_grad()
    def accumulate_curvature(self):
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["h"] = st.get("h", torch.zeros_like(p)) * 0.9 + 0.1 * p.grad * p.grad


class Loop:
    def __init__(self):
        self.net = nn.Linear(3, 2)
        self.optim = Curvature(self.net.parameters(), lr=0.1)

    def run(self, n):
        for i in range(n):
            x = torch.randn(4, 3)
            F.mse_loss(self.net(x), torch.zeros(4, 2)).backward()
            self.optim.step()
            self.optim.zero_grad()
            out = self.net(x)
            F.cross_entropy(out, out.argmax(1)).backward()
            self.optim.accumulate_curvature()
            self.optim.zero_grad()


Loop().run(3)
""",
    # a guard skips the step of one pass whose gradient norm spiked and drops its gradient on
    # purpose; every other pass steps
    "step_skipped_on_a_gradient_norm_spike": """
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for it in range(6):
    scale = 50.0 if it == 2 else 1.0
    optimizer.zero_grad()
    F.mse_loss(model(torch.randn(4, 3) * scale), torch.randn(4, 1)).backward()
    norm = nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    if norm > 20:
        continue
    optimizer.step()
""",
    # per-step totals of a MAML-like inner loop (autograd.grad), summed within one outer step
    # and back-propagated once: no graph outlives the step
    "inner_loop_totals_within_one_outer_step": """
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def adapted_losses(x, y, steps=3):
    totals = [0.0] * steps
    for task in range(2):
        fw, fb = net.weight, net.bias
        for s in range(steps):
            loss = F.mse_loss(F.linear(x[task], fw, fb), y[task])
            gw, gb = torch.autograd.grad(loss, (fw, fb), create_graph=True)
            fw, fb = fw - 0.1 * gw, fb - 0.1 * gb
            totals[s] += F.mse_loss(F.linear(x[task], fw, fb), y[task])
    return totals

for _ in range(3):
    opt.zero_grad()
    totals = adapted_losses(torch.randn(2, 5, 4), torch.randn(2, 5, 2))
    totals[-1].backward()
    opt.step()
""",
    # LBFGS re-evaluates its closure (zero_grad, forward, backward) several times inside one
    # step(): those cleared gradients were used by the step that called them
    "lbfgs_closure_clears_inside_the_step": """
class Fitter:
    def __init__(self):
        self.model = nn.Linear(3, 1)
        self.opt = torch.optim.LBFGS(self.model.parameters(), lr=0.5, max_iter=6)

    def fit(self, batches):
        for x, y in batches:
            def closure():
                self.opt.zero_grad()
                loss = F.mse_loss(self.model(x), y)
                loss.backward()
                return loss
            self.opt.step(closure)

Fitter().fit([(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)])
""",
    "detach_helper_handles_tuples": """
lstm = nn.LSTM(2, 3)
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)

def keep(state):
    if torch.is_tensor(state):
        return state.detach()
    return tuple(s.detach() for s in state)

state = None
for chunk in torch.randn(3, 4, 1, 2):
    out, new_state = lstm(chunk, state)
    opt.zero_grad()
    out.pow(2).mean().backward()
    opt.step()
    state = keep(new_state)
""",
    "adaptation_step_after_adversarial_backward": """
class Adapt:
    def __init__(self):
        self.seg, self.disc = nn.Linear(3, 2), nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.seg.parameters(), lr=0.1)
        self.opt_d = torch.optim.SGD(self.disc.parameters(), lr=0.1)

    def step(self, src, tgt):
        self.opt.zero_grad()
        self.opt_d.zero_grad()
        F.mse_loss(self.seg(src), torch.zeros(4, 2)).backward()
        self.disc.requires_grad_(False)
        self.disc(self.seg(tgt)).mean().backward()
        self.opt.step()
        self.disc.requires_grad_(True)
        self.disc(self.seg(tgt).detach()).pow(2).mean().backward()
        self.opt_d.step()

adapt = Adapt()
for _ in range(3):
    adapt.step(torch.randn(4, 3), torch.randn(4, 3))
""",
    "encoder_excluded_from_optimizer_on_purpose": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.head = nn.Linear(3, 4), nn.Linear(4, 1)

    def forward(self, x):
        return self.head(self.encoder(x))

class Trainer:
    def __init__(self, net):
        self.net = net
        frozen = set(net.encoder.parameters())
        self.opt = torch.optim.SGD([p for p in net.parameters() if p not in frozen], lr=0.1)

    def step(self, x):
        self.opt.zero_grad()
        self.net(x).pow(2).mean().backward()
        self.opt.step()

trainer = Trainer(Net())
for _ in range(2):
    trainer.step(torch.randn(2, 3))
""",
    "backward_per_loss_of_separate_forwards": """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for loss in [net(torch.randn(2, 3)).pow(2).mean(), net(torch.randn(2, 3)).abs().mean()]:
    opt.zero_grad()
    loss.backward()
    opt.step()
head = nn.Linear(3, 4)
opt_head = torch.optim.SGD(head.parameters(), lr=0.1)
for _ in range(2):
    dist = torch.distributions.Categorical(logits=head(torch.ones(1, 3)))
    opt_head.zero_grad()
    (-dist.log_prob(dist.sample()).sum()).backward()
    opt_head.step()
""",
    "no_grad_helper_builds_target_only": """
net = nn.Linear(4, 4)

@torch.no_grad()
def smooth_target(x):
    return torch.softmax(net(x) * 0.5, -1)

x = torch.randn(3, 4)
loss = F.kl_div(torch.log_softmax(net(x), -1), smooth_target(x), reduction="batchmean")
loss.backward()
""",
    "accumulation_carried_across_epochs": """
def fit(model, opt, data, accumulate=3, epochs=2):
    seen = 0
    opt.zero_grad()
    for epoch in range(epochs):
        for x, y in data:
            (F.mse_loss(model(x), y) / accumulate).backward()
            seen += 1
            if seen % accumulate == 0:
                opt.step()
                opt.zero_grad()

model = nn.Linear(3, 1)
fit(model, torch.optim.SGD(model.parameters(), lr=0.1),
    [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)])
""",
    "saliency_backward_then_cleared_each_epoch": """
net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def saliency(x):
    x = x.clone().requires_grad_(True)
    net(x).sum().backward()
    net.zero_grad()
    return x.grad.abs().mean().item()

for epoch in range(3):
    for _ in range(2):
        opt.zero_grad()
        F.mse_loss(net(torch.randn(4, 3)), torch.randn(4, 1)).backward()
        opt.step()
    saliency(torch.randn(2, 3))
""",
    "gan_generator_backward_reaches_critic": """
gen, critic = nn.Linear(2, 3), nn.Linear(3, 1)
opt_g = torch.optim.Adam(gen.parameters())
opt_c = torch.optim.Adam(critic.parameters())
for _ in range(3):
    fake = gen(torch.randn(4, 2))
    opt_c.zero_grad()
    (critic(fake.detach()).mean() - critic(torch.randn(4, 3)).mean()).backward()
    opt_c.step()
    opt_g.zero_grad()
    (-critic(fake).mean()).backward()
    opt_g.step()
""",
    "alias_copied_before_writes": """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.side, self.mix = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, feats):
        side = self.side(feats)
        acc = feats.clone()
        acc += self.mix(feats)
        rows = acc[0].unsqueeze(0).clone()
        acc[0] = rows.pow(2).squeeze(0)
        return side * acc

stem = nn.Linear(4, 4)
Block()(torch.tanh(stem(torch.randn(3, 4)))).sum().backward()
""",
    "gradient_in_output_shape": """
net = nn.Linear(4, 1)
out = net(torch.randn(5, 4)).squeeze(1)
weights = torch.linspace(0.5, 1.0, 5)
out.backward(weights)
seq = [net.bias.sum() * 2, net.weight.sum()]
torch.autograd.backward(seq, [torch.tensor(1.0), torch.tensor(2.0)])
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_root_line_named_first(tmp_path, name):
    """The runtime's own diagnosis (static checks off: a static finding may lead a real run)."""
    import runpy

    import gradtrace

    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    path = tmp_path / f"{name}.py"
    path.write_text(src, encoding="utf-8")
    tr = gradtrace.trace(static=False)
    try:
        with tr:
            runpy.run_path(str(path))
        found = tr.findings
    except Exception as exc:  # noqa: BLE001 - the crash bugs raise
        found = tr.diagnose(exc)
    assert found, tr.findings
    assert (found[0].code, found[0].line) == (code, line), found


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], res.err
