"""Silent bugs whose run looks like ordinary training (issue #13 §2, held-out 5): each named at
its cause line, in spellings other than the real-world cases they came from, and look-alikes
that train and stay silent. Real torch, in-process.

- running totals that start as a plain tensor (YOLO's defaultdict; here a plain dict of zeros
  and a list of per-term totals, labelmodels#4's shape);
- out-of-place ops whose result is dropped (flamingo-pytorch#10; ParlAI#3068's masked_fill, the
  DQN tutorial's `p.grad.data.clamp(-1, 1)`, a dropped `F.relu`);
- clipping before `scaler.unscale_` (Pytorch-UNet#468; catalyst#1319's clip callback,
  returnn#1590's value clip);
- one layer at several positions of a container (nngeometry#60; U-Net_v2#10's
  `ModuleList([Conv2d] * 4)`, pytorch-vq-vae#2's residual stack, DAB-DETR#17's comprehension);
- a loss term computed under no_grad from the model's output and added to live terms
  (consistency-policy#4; MAML-Pytorch#40's no_grad query loss);
- a scheduler counted in epochs stepped per batch (SRGAN-PyTorch#1; a MultiStepLR in a
  trainer's step, an ExponentialLR in a fit function), with bshall/Tacotron#3's milestones in
  iterations as a look-alike;
- a part of the model put in eval mode as a freeze and trained all the same (GPT-SoVITS#1921;
  a linear probe's backbone, EEGPT#18 / RD4AD#33 as look-alikes where the optimizer leaves it
  out);
- optimizer state loaded into an optimizer that is then rebuilt (OpenNMT-py#617; CodefyUI#147's
  fit() that rebuilds the resumed optimizer);
- an in-place activation leading a block rewrites the caller's residual input (vq-vae-2#60; a
  pre-activation MLP block's LeakyReLU).
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n=4):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g))
            for _ in range(n)]
"""

BUGS = {
    # a plain dict of zero tensors keyed by loss name, the terms added with their graphs
    "totals_dict_of_zero_tensors": ("GT505", """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
totals = {"ce": torch.zeros(()), "reg": torch.zeros(())}
for x, y in batches():
    out = model(x)
    terms = {"ce": F.cross_entropy(out, y), "reg": out.pow(2).mean()}
    opt.zero_grad()
    sum(terms.values()).backward()
    opt.step()
    for k, v in terms.items():
        totals[k] += v  # C
print({k: float(v) for k, v in totals.items()})
"""),
    # a list of per-term totals updated with add_
    "totals_list_add_": ("GT505", """
model = nn.Linear(6, 3)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
running = [torch.tensor(0.0) for _ in range(2)]
for x, y in batches():
    out = model(x)
    parts = [F.cross_entropy(out, y), 1e-3 * out.abs().mean()]
    opt.zero_grad()
    (parts[0] + parts[1]).backward()
    opt.step()
    for total, part in zip(running, parts):
        total.add_(part)  # C
"""),
    # ParlAI#3068: the padding mask of attention scores computed and dropped
    "masked_fill_dropped_in_attention": ("GT708", """
class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(6, 6), nn.Linear(6, 6)

    def forward(self, x, pad):
        scores = self.q(x) @ self.k(x).t()
        scores.masked_fill(pad[None, :], float("-inf"))  # C
        return scores.softmax(-1) @ x

model = Attn()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
pad = torch.tensor([False, False, True, True])
for x, y in batches():
    opt.zero_grad()
    model(x, pad).sum().backward()
    opt.step()
"""),
    # the DQN tutorial's gradient clip that never clips
    "grad_clamp_dropped": ("GT708", """
model = nn.Linear(6, 3)
opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
for x, y in batches():
    opt.zero_grad()
    F.smooth_l1_loss(model(x), F.one_hot(y, 3).float()).backward()
    for param in model.parameters():
        param.grad.data.clamp(-1, 1)  # C
    opt.step()
"""),
    # an activation written as a statement of its own in forward
    "functional_relu_dropped": ("GT708", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        h = self.a(x)
        F.relu(h)  # C
        return self.b(h)

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # catalyst#1319: a clip callback runs on the scaled gradients, the scaler unscales in step
    "clip_callback_before_scaler_step": ("GT524", """
def clip(params):
    torch.nn.utils.clip_grad_norm_(params, max_norm=0.5)  # C

model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for x, y in batches():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x).float(), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    clip(model.parameters())
    scaler.step(opt)
    scaler.update()
"""),
    # returnn#1590: a value clip on the scaled gradients
    "value_clip_before_unscale": ("GT524", """
model = nn.Linear(6, 3)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
for x, y in batches():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)  # C
    scaler.step(opt)
    scaler.update()
"""),
    # U-Net_v2#10: four convs meant, one conv object repeated
    "modulelist_of_one_conv": ("GT843", """
class SDI(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(c, c, 3, padding=1)] * 4)  # C

    def forward(self, xs):
        return sum(conv(x) for conv, x in zip(self.convs, xs))

model = SDI()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    xs = [torch.randn(2, 4, 8) for _ in range(4)]
    opt.zero_grad()
    model(xs).pow(2).mean().backward()
    opt.step()
"""),
    # DAB-DETR#17: a comprehension that repeats a layer built outside it
    "comprehension_repeats_one_block": ("GT843", """
class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        block = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.blocks = nn.ModuleList([block for _ in range(n)])  # C
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        for b in self.blocks:
            x = x + b(x)
        return self.head(x)

model = Stack()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # the same residual block appended twice to a Sequential
    "block_added_twice": ("GT843", """
body = nn.Sequential()
res = nn.Linear(6, 6)
body.add_module("r0", res)
body.add_module("act", nn.ReLU())
body.add_module("r1", res)  # C
model = nn.Sequential(body, nn.Linear(6, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # a consistency term on the model's own features, computed under no_grad (MAML-Pytorch#40's
    # query loss under no_grad, summed with the live ones)
    "consistency_term_under_no_grad": ("GT844", """
body, head = nn.Linear(6, 8), nn.Linear(8, 3)
opt = torch.optim.Adam([*body.parameters(), *head.parameters()], lr=1e-3)
for x, y in batches():
    feats = body(x)
    with torch.no_grad():
        proj = F.normalize(feats, dim=-1)  # C
        cons = (proj - proj.roll(1, 0)).pow(2).mean()
    loss = F.cross_entropy(head(feats), y) + 0.1 * cons
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # a trainer steps its MultiStepLR (milestones in epochs) in every train step
    "multisteplr_stepped_in_train_step": ("GT526", """
class Trainer:
    def __init__(self, model, epochs=3):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        self.scheduler = torch.optim.lr_scheduler.MultiStepLR(
            self.opt, milestones=[1, 2, epochs], gamma=0.1)

    def train_step(self, x, y):
        self.opt.zero_grad()
        F.cross_entropy(self.model(x), y).backward()
        self.opt.step()
        self.scheduler.step()  # C

trainer = Trainer(nn.Linear(6, 3))
for epoch in range(3):
    for x, y in batches(3):
        trainer.train_step(x, y)
"""),
    # ExponentialLR(gamma=0.1) meant per epoch, stepped per batch inside a function
    "exponentiallr_per_batch_in_function": ("GT526", """
def fit(model, epochs=2):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    decay = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.1)
    for epoch in range(epochs):
        for x, y in batches(6):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            decay.step()  # C

fit(nn.Linear(6, 3))
"""),
    # a linear probe whose backbone is "frozen" by eval() alone (EEGPT#18's shape, with the
    # optimizer built over every parameter)
    "probe_backbone_eval_only": ("GT846", """
class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        feats = self.backbone(x)  # C
        return self.head(feats)

model = Probe()
model.backbone.eval()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # CodefyUI#147: resume() loads the optimizer state, fit() builds the optimizer again
    "trainer_fit_rebuilds_resumed_optimizer": ("GT847", """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def resume(self, ckpt):
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])

    def fit(self, data):
        self.optimizer = type(self.optimizer)(self.model.parameters(), **self.optimizer.defaults)  # C
        for x, y in data:
            self.optimizer.zero_grad()
            F.cross_entropy(self.model(x), y).backward()
            self.optimizer.step()

first = Trainer(nn.Linear(6, 3))
first.fit(batches(2))
ckpt = {"model": first.model.state_dict(), "optimizer": first.optimizer.state_dict()}
second = Trainer(nn.Linear(6, 3))
second.resume(ckpt)
second.fit(batches(2))
"""),
    # the branch taken reads the input again after the in-place activation: the layer built
    # with inplace=True is named (session 22: iResNet's fix is at the constructor)
    "inplace_activation_then_input_read_in_same_branch": ("GT848", """
class ConvModule(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.activate = nn.ReLU(inplace=True)  # C

    def forward(self, x):
        return self.activate(x) + x if self.activate is not None else x

model = nn.Sequential(nn.Linear(6, 6), ConvModule(), nn.Linear(6, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # a pre-activation residual MLP block whose leading LeakyReLU is in place
    "preact_block_leaky_relu_inplace": ("GT848", """
class PreAct(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.body = nn.Sequential(
            nn.LeakyReLU(0.2, inplace=True),  # C
            nn.Linear(d, d))

    def forward(self, x):
        h = self.body(x)
        return h + x

model = nn.Sequential(nn.Linear(6, 6), PreAct(), nn.Linear(6, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
}

LOOKALIKES = {
    # in-place activations whose input the caller rebinds or never reads again
    "inplace_activations_rebound": """
class Block(nn.Module):
    def __init__(self, d=6):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d), nn.Linear(d, d)
        self.relu = nn.ReLU(inplace=True)
        self.tail = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(d, d))

    def forward(self, x):
        identity = x
        out = self.fc1(x)
        out = self.relu(out)
        out = self.fc2(out)
        out = out + identity
        out = self.tail(out)
        return out

model = nn.Sequential(nn.Linear(6, 6), Block(), nn.Linear(6, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # the input read again only on the branch not taken (mmdetection's ConvModule), and a
    # buggy twin's shape where the branch taken does read it
    "inplace_activation_other_branch_reads_input": """
class ConvModule(nn.Module):
    def __init__(self, d=6, act=True):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.activate = nn.ReLU(inplace=True) if act else None

    def forward(self, x):
        x = self.fc(x)
        return self.activate(x) if self.activate is not None else x

model = nn.Sequential(nn.Linear(6, 6), ConvModule(), nn.Linear(6, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # the state loaded into the optimizer that steps; a new stage with another optimizer class
    "resume_into_stepping_optimizer": """
model = nn.Linear(6, 3)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y in batches(2):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
ckpt = {"optimizer": opt.state_dict()}
model2 = nn.Linear(6, 3)
opt2 = torch.optim.Adam(model2.parameters(), lr=1e-3)
opt2.load_state_dict(ckpt["optimizer"])
for x, y in batches(2):
    opt2.zero_grad()
    F.cross_entropy(model2(x), y).backward()
    opt2.step()
finetune = torch.optim.SGD(model2.parameters(), lr=0.01)
for x, y in batches(2):
    finetune.zero_grad()
    F.cross_entropy(model2(x), y).backward()
    finetune.step()
""",
    # EEGPT#18 / RD4AD#33: the eval-mode encoder is left out of the optimizer; a backbone
    # whose BatchNorm statistics are frozen by eval() on purpose; a whole model in eval mode
    "eval_encoder_not_optimized_bn_frozen_whole_model_eval": """
class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(6, 6)
        self.encoder = nn.Sequential(nn.Linear(6, 8), nn.GELU())
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.encoder(self.stem(x)))

probe = Probe()
probe.encoder.eval()
opt = torch.optim.AdamW([*probe.stem.parameters(), *probe.head.parameters()], lr=1e-3)
net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
net[1].eval()
opt2 = torch.optim.SGD(net.parameters(), lr=0.1)
plain = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)).eval()
opt3 = torch.optim.SGD(plain.parameters(), lr=0.1)
for x, y in batches():
    for o in (opt, opt2, opt3):
        o.zero_grad()
    (F.cross_entropy(probe(x), y) + F.cross_entropy(net(x), y)
     + F.cross_entropy(plain(x), y)).backward()
    for o in (opt, opt2, opt3):
        o.step()
""",
    # OneCycleLR is meant per batch; StepLR per epoch; milestones counted in iterations
    "schedulers_in_their_units": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=12)
for x, y in batches(12):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    cycle.step()
model2 = nn.Linear(6, 3)
opt2 = torch.optim.SGD(model2.parameters(), lr=0.1)
per_epoch = torch.optim.lr_scheduler.StepLR(opt2, step_size=1, gamma=0.1)
iters = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[20000, 40000], gamma=0.5)
for epoch in range(5):
    for x, y in batches(3):
        opt.zero_grad()
        opt2.zero_grad()
        (F.cross_entropy(model(x), y) + F.cross_entropy(model2(x), y)).backward()
        opt2.step()
        opt.step()
        iters.step()
    per_epoch.step()
""",
    # a stop-gradient target inside a live term, a frozen teacher's constant, a logged total
    "stop_gradient_target_teacher_constant_logged_total": """
model, teacher = nn.Linear(6, 3), nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    out = model(x)
    with torch.no_grad():
        target = out.softmax(-1)
        t_energy = teacher(x).pow(2).mean()
        acc = (out.argmax(1) == y).float().mean()
    loss = F.cross_entropy(out, y) + F.kl_div(out.log_softmax(-1), target, reduction="batchmean")
    loss = loss + 0.0 * t_energy
    logged = loss + acc
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(float(logged))
""",
    # totals kept as numbers or detached tensors
    "totals_detached_and_items": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
totals = {"ce": torch.zeros(()), "reg": 0.0}
for x, y in batches():
    out = model(x)
    ce, reg = F.cross_entropy(out, y), out.pow(2).mean()
    opt.zero_grad()
    (ce + reg).backward()
    opt.step()
    totals["ce"] += ce.detach()
    totals["reg"] += reg.item()
""",
    # gradient accumulation: the running loss is backpropagated, then started again
    "accumulated_loss_backpropagated": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
acc = torch.zeros(())
for i, (x, y) in enumerate(batches(6)):
    acc += F.cross_entropy(model(x), y) / 2
    if i % 2 == 1:
        opt.zero_grad()
        acc.backward()
        opt.step()
        acc = torch.zeros(())
""",
    # the mask applied in place and by assignment
    "masked_fill_kept": """
class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k = nn.Linear(6, 6), nn.Linear(6, 6)

    def forward(self, x, pad):
        scores = self.q(x) @ self.k(x).t()
        scores.masked_fill_(pad[None, :], float("-inf"))
        attn = scores.softmax(-1)
        attn = attn.masked_fill(pad[:, None], 0.0)
        return attn @ x

model = Attn()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
pad = torch.tensor([False, False, True, True])
for x, y in batches():
    opt.zero_grad()
    model(x, pad).sum().backward()
    opt.step()
    for p in model.parameters():
        p.grad.data.clamp_(-1, 1)
""",
    # the AMP recipe: unscale, clip, step
    "unscale_then_clip": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu")
for x, y in batches():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x).float(), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    scaler.step(opt)
    scaler.update()
""",
    # clipping without a GradScaler
    "clip_without_scaling": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
""",
    # weight tying, one layer applied several times, a shared parameter-free activation
    "weight_tying_and_shared_activation": """
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        act = nn.Tanh()
        self.enc = nn.Sequential(nn.Linear(6, 4), act, nn.Linear(4, 4), act)
        self.dec = nn.Linear(4, 6)
        self.dec.weight = nn.Parameter(self.enc[0].weight.t().detach().clone())
        self.shared = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)
        self.head_alias = self.head

    def forward(self, x):
        h = self.enc(x)
        for _ in range(3):
            h = torch.tanh(self.shared(h))
        return self.head(h) + 0.0 * self.dec(h).sum()

model = Tied()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in batches():
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
}


def _src(body: str) -> str:
    return (HEAD + body).lstrip("\n")


@pytest.mark.parametrize("name", sorted(BUGS))
def test_cause_line_named_first(run_script, name):
    code, body = BUGS[name]
    src = _src(body)
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.findings, res.err
    assert (res.findings[0]["code"], res.findings[0]["line"]) == (code, line), res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_silent(run_script, name):
    res = run_script(_src(LOOKALIKES[name]))
    assert res.code == 0 and res.findings == [], res.findings
