"""Silent bugs of issue #13 seen by the run (session 18, held-out 12 misses): a soft target that
is not detached (GT878, NOTE [soft target not detached]; the dual-decoder distillation), an
accumulation window that starts one batch early (GT879, NOTE [accumulation window off by one];
LLMs-from-scratch) and embedding rows frozen by zeroing their gradient but moved by weight
decay (GT870, NOTE [decayed rows]; diffusers textual inversion). Buggy twins in spellings other
than the real-world cases, and correct look-alikes that must stay silent. Real torch,
in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

def batches(n=6, vocab=12):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g),
             torch.randint(1, vocab, (4, 5), generator=g)) for _ in range(n)]
"""

WATCHED = {"GT878", "GT879", "GT870", "GT874", "GT872", "GT873"}

BUGS = {
    # a teacher trained with the student, whose probabilities feed kl_div without detach
    "kl_div_teacher_not_detached": ("GT878", """
teacher = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
student = nn.Linear(6, 3)
opt = torch.optim.SGD([*teacher.parameters(), *student.parameters()], lr=0.1)
for x, y, _ in batches():
    t_logits, s_logits = teacher(x), student(x)
    soft = F.softmax(t_logits / 2.0, dim=1)  # <- cause
    kd = F.kl_div(F.log_softmax(s_logits / 2.0, dim=1), soft, reduction="batchmean")
    loss = F.cross_entropy(t_logits, y) + F.cross_entropy(s_logits, y) + kd
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # soft labels from a second model given to cross_entropy as probabilities
    "cross_entropy_prob_target_from_other_model": ("GT878", """
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.big = nn.Linear(6, 3)
        self.small = nn.Linear(6, 3)

    def forward(self, x):
        return self.big(x), self.small(x)

def soft_labels(logits):
    return logits.softmax(-1)  # <- cause

model = Pair()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for x, y, _ in batches():
    big, small = model(x)
    loss = F.cross_entropy(big, y) + F.cross_entropy(small, soft_labels(big))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # a while loop counting micro-batches from 0: the first step sees one of them
    "while_counter_from_zero": ("GT879", """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = batches(9)
i = 0
while i < len(data):
    x, y, _ = data[i]
    (F.cross_entropy(model(x), y) / 4).backward()
    if i % 4 == 0:  # <- cause
        opt.step()
        opt.zero_grad()
    i += 1
"""),
    # the step in a trainer method, counted with a global step from 0, two epochs
    "trainer_global_step_from_zero": ("GT879", """
class Trainer:
    def __init__(self, model, accum=3):
        self.model, self.accum, self.global_step = model, accum, 0
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def train_epoch(self, data):
        for x, y, _ in data:
            (F.cross_entropy(self.model(x), y) / self.accum).backward()
            if self.global_step % self.accum == 0:  # <- cause
                self.opt.step()
                self.opt.zero_grad()
            self.global_step += 1

t = Trainer(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)))
for epoch in range(2):
    t.train_epoch(batches(7))
"""),
    # new tokens trained, the old rows frozen by a gradient hook that masks them, SGD decay
    "hook_masks_old_rows_sgd_decay": ("GT870", """
emb = nn.Embedding(12, 6)
head = nn.Linear(6, 3)
head.requires_grad_(False)
new_rows = torch.zeros(12, 1)
new_rows[10:] = 1.0
emb.weight.register_hook(lambda g: g * new_rows)
opt = torch.optim.SGD(emb.parameters(), lr=0.1, weight_decay=1e-2)  # <- cause
for _, y, ids in batches():
    ids = torch.cat([ids[:, :4], torch.full((4, 1), 10)], dim=1)
    loss = F.cross_entropy(head(emb(ids).mean(1)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # the old rows' gradient zeroed in place before the step (index_fill_), AdamW
    "index_fill_old_rows_adamw": ("GT870", """
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(12, 6)

    def forward(self, ids):
        return self.tok(ids).sum(1)

enc = Encoder()
opt = torch.optim.AdamW(enc.parameters(), lr=1e-3)  # <- cause
frozen = torch.arange(11)
for _, y, ids in batches():
    ids[:, 0] = 11
    loss = enc(ids).pow(2).mean()
    loss.backward()
    enc.tok.weight.grad.index_fill_(0, frozen, 0.0)
    opt.step()
    opt.zero_grad()
"""),
    # a shared per-batch helper that puts the model in train mode for every phase, run for
    # validation under the caller's no_grad
    "phase_helper_always_train": ("GT874", """
net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def run_batch(model, x, y, phase):
    model.train()  # <- cause
    loss = F.cross_entropy(model(x), y)
    if phase == "train":
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()

for epoch in range(2):
    for x, y, _ in batches(3):
        run_batch(net, x, y, "train")
    with torch.no_grad():
        val = [run_batch(net, x + 1, y, "valid") for x, y, _ in batches(3)]
"""),
    # a tie written through .data: two Parameters over one storage, Adam steps both
    "tie_through_data_adam": ("GT872", """
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(12, 6)
        self.dec = nn.Linear(6, 12, bias=False)
        self.dec.weight.data = self.enc.weight.data

    def forward(self, ids):
        return self.dec(torch.tanh(self.enc(ids)))

lm = LM()
opt = torch.optim.Adam(lm.parameters(), lr=1e-2)  # <- cause
for _, _, ids in batches():
    loss = F.cross_entropy(lm(ids).flatten(0, 1), ids.roll(1, 1).flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
    # a validation that back-propagates to log a gradient norm; the training loop zeroes
    # after its step, so the next step applies the validation gradients
    "validation_backward_for_grad_norm": ("GT873", """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.1), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

def val_grad_norm(data):
    model.eval()
    for x, y, _ in data:
        F.cross_entropy(model(x), y).backward()  # <- cause
    model.train()
    return sum(p.grad.norm() for p in model.parameters()).item()

for epoch in range(2):
    for x, y, _ in batches(3):
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    val_grad_norm(batches(2))
"""),
    # a focal weight taken from the sigmoid, the sigmoid also fed to the logits loss: the loss
    # call is the line to change (NOTE [sigmoid kept as probabilities])
    "focal_weight_and_logits_loss_share_sigmoid": ("GT837", """
def focal(logits, y, gamma=2.0):
    p = logits.sigmoid()
    w = (1 - torch.where(y > 0, p, 1 - p)) ** gamma
    return (w * F.binary_cross_entropy_with_logits(p, y, reduction="none")).mean()  # <- cause

model = nn.Linear(6, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y, _ in batches():
    loss = focal(model(x).squeeze(1), (y > 0).float())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""),
}

LOOKALIKES = {
    # the same tie by sharing the Parameter object
    "tie_by_parameter_adam": """
class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Embedding(12, 6)
        self.dec = nn.Linear(6, 12, bias=False)
        self.dec.weight = self.enc.weight

    def forward(self, ids):
        return self.dec(torch.tanh(self.enc(ids)))

lm = LM()
opt = torch.optim.Adam(lm.parameters(), lr=1e-2)
for _, _, ids in batches():
    loss = F.cross_entropy(lm(ids).flatten(0, 1), ids.roll(1, 1).flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # the .data tie under plain SGD: two updates are the summed gradient's one
    "tie_through_data_plain_sgd": """
enc, dec = nn.Embedding(12, 6), nn.Linear(6, 12, bias=False)
dec.weight.data = enc.weight.data
opt = torch.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)
for _, _, ids in batches():
    loss = F.cross_entropy(dec(enc(ids)).flatten(0, 1), ids.flatten())
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # the same validation, the gradients zeroed before each training step
    "validation_backward_then_zero_grad_first": """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.1), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

def val_grad_norm(data):
    model.eval()
    for x, y, _ in data:
        F.cross_entropy(model(x), y).backward()
    model.train()
    return sum(p.grad.norm() for p in model.parameters()).item()

for epoch in range(2):
    for x, y, _ in batches(3):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    val_grad_norm(batches(2))
""",
    # a validation run with grad on but no backward(), between epochs of accumulation by 2
    "validation_with_grad_on_no_backward": """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.1), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    model.train()
    for i, (x, y, _) in enumerate(batches(4)):
        (F.cross_entropy(model(x), y) / 2).backward()
        if (i + 1) % 2 == 0:
            opt.step()
            opt.zero_grad()
    model.eval()
    val = [F.cross_entropy(model(x), y).item() for x, y, _ in batches(2)]
""",
    # a model trained in eval mode throughout (dropout off on purpose)
    "trained_in_eval_mode_throughout": """
model = nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.1), nn.Linear(8, 3))
model.eval()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y, _ in batches(6):
    F.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""",
    # the helper switches the mode by phase
    "phase_helper_switches_by_phase": """
net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def run_batch(model, x, y, phase):
    model.train(phase == "train")
    loss = F.cross_entropy(model(x), y)
    if phase == "train":
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()

for epoch in range(2):
    for x, y, _ in batches(3):
        run_batch(net, x, y, "train")
    with torch.no_grad():
        val = [run_batch(net, x + 1, y, "valid") for x, y, _ in batches(3)]
""",
    # a helper that refreshes the BatchNorm statistics under no_grad (output dropped)
    "bn_refresh_helper": """
net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)

def refresh_bn(model, data):
    model.train()
    for x, _, _ in data:
        model(x)

for epoch in range(2):
    for x, y, _ in batches(3):
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    with torch.no_grad():
        refresh_bn(net, batches(3))
    net.eval()
    with torch.no_grad():
        val = [net(x).argmax(1) for x, _, _ in batches(2)]
    net.train()
""",
    # the teacher's probabilities detached
    "kl_div_teacher_detached": """
teacher = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
student = nn.Linear(6, 3)
opt = torch.optim.SGD([*teacher.parameters(), *student.parameters()], lr=0.1)
for x, y, _ in batches():
    t_logits, s_logits = teacher(x), student(x)
    soft = F.softmax(t_logits / 2.0, dim=1).detach()
    kd = F.kl_div(F.log_softmax(s_logits / 2.0, dim=1), soft, reduction="batchmean")
    loss = F.cross_entropy(t_logits, y) + F.cross_entropy(s_logits, y) + kd
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # an entropy bonus over one set of logits (temperature applied on each side apart)
    "entropy_bonus_same_logits": """
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for x, y, _ in batches():
    logits = model(x)
    p, logp = F.softmax(logits / 2, -1), F.log_softmax(logits / 2, -1)
    loss = F.cross_entropy(logits, y) + 0.01 * (p * logp).sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # the teacher run under no_grad, its probabilities used as soft labels
    "teacher_under_no_grad": """
teacher, student = nn.Linear(6, 3), nn.Linear(6, 3)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for x, y, _ in batches():
    with torch.no_grad():
        soft = teacher(x).softmax(-1)
    loss = -(soft * F.log_softmax(student(x), -1)).sum(-1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # accumulation counted from 1, a last partial window flushed
    "accumulation_from_one_with_flush": """
model = nn.Linear(6, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = batches(10)
for i, (x, y, _) in enumerate(data):
    (F.cross_entropy(model(x), y) / 4).backward()
    if (i + 1) % 4 == 0 or i + 1 == len(data):
        opt.step()
        opt.zero_grad()
""",
    # a discriminator stepped after two backward() calls, the generator after one
    "gan_two_backward_per_d_step": """
G, D = nn.Linear(4, 6), nn.Linear(6, 1)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
for x, _, _ in batches():
    z = torch.randn(4, 4)
    opt_d.zero_grad()
    F.softplus(-D(x)).mean().backward()
    F.softplus(D(G(z).detach())).mean().backward()
    opt_d.step()
    opt_g.zero_grad()
    F.softplus(-D(G(z))).mean().backward()
    opt_g.step()
""",
    # the frozen rows copied back after each step (the later textual-inversion fix)
    "frozen_rows_restored": """
emb = nn.Embedding(12, 6)
keep = emb.weight.detach().clone()
opt = torch.optim.AdamW(emb.parameters(), lr=1e-3)
old = torch.arange(12) < 11
for _, y, ids in batches():
    ids[:, 0] = 11
    emb(ids).pow(2).mean().backward()
    emb.weight.grad[old] = 0
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        emb.weight[old] = keep[old]
""",
    # a pad token given no padding_idx, masked out of the loss: one zero row among many
    "masked_pad_row_without_padding_idx": """
emb = nn.Embedding(12, 6)
head = nn.Linear(6, 3)
opt = torch.optim.AdamW([*emb.parameters(), *head.parameters()], lr=1e-3, weight_decay=0.1)
for _, y, ids in batches():
    ids[:, -1] = 0
    mask = (ids != 0).float().unsqueeze(-1)
    loss = F.cross_entropy(head((emb(ids) * mask).sum(1)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a classifier reading the last position only: the other positions' rows get a zero
    # gradient from backward() itself, AdamW decays them (no program zeroed anything)
    "last_token_classifier_adamw": """
emb = nn.Embedding(12, 6)
head = nn.Linear(6, 3)
opt = torch.optim.AdamW([*emb.parameters(), *head.parameters()], lr=1e-3, weight_decay=0.1)
for _, y, ids in batches():
    ids[:, -1] = 11
    loss = F.cross_entropy(head(emb(ids)[:, -1]), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a padding_idx row (its gradient is always zero), weight decay on
    "padding_idx_row": """
emb = nn.Embedding(12, 6, padding_idx=0)
opt = torch.optim.AdamW(emb.parameters(), lr=1e-3, weight_decay=0.1)
for _, y, ids in batches():
    ids[:, -1] = 0
    emb(ids).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_bug_named_at_its_cause(name, run_script):
    code, body = BUGS[name]
    src = HEAD + body
    res = run_script(src)
    assert res.code == 0, res.err
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["path"]) == (code, marked_line(src), "prog.py"), \
        res.findings


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_stays_silent(name, run_script):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert not WATCHED & set(res.codes()), res.findings
