"""`gradtrace run` on an in-place error after `optimizer.step()` whose failing backward() runs into
a graph an earlier `backward(retain_graph=True)` kept (NOTE [retained graph] in
`runtime/trace/diagnose_inplace.py`; issue 13 §2): the line to change, not the step.

- state fed back into the next pass at the same backward() line (the LSTM hidden state of the
  held-out 8 blog post, here a GRU, and a hand-written recurrent cell): the statement that
  reads and rebinds it (GT506);
- both losses computed first, then a generator step with retain_graph=True before the loss of
  another model on the same output (here a critic, and a reward model over an encoder's
  output): the line of the failing loss that takes the output in without `.detach()` (GT508).

Look-alikes that train: the state detached before it is fed back, the output detached for the
critic. Two losses of one model with a step in between keep GT601 at the step (test_scenarios
e4). Real torch, in-process `gradtrace run`.
"""
from __future__ import annotations

import pytest

HEAD = """
import torch
import torch.nn as nn
"""

BUGS = {
    "gru_state_fed_back_with_retain_graph": ("GT506", """
rnn = nn.GRU(3, 5, batch_first=True)
head = nn.Linear(5, 1)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
h = torch.zeros(1, 2, 5)
for step in range(3):
    out, h = rnn(torch.randn(2, 4, 3), h)  # C
    loss = head(out).pow(2).mean()
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
"""),
    "cell_state_in_function_with_retain_graph": ("GT506", """
cell = nn.RNNCell(4, 6)
readout = nn.Linear(6, 2)
opt = torch.optim.Adam(list(cell.parameters()) + list(readout.parameters()), lr=1e-3)

def train(batches):
    state = torch.zeros(3, 6)
    for x, y in batches:
        state = cell(x, state)  # C
        loss = nn.functional.mse_loss(readout(state), y)
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()

train([(torch.randn(3, 4), torch.randn(3, 2)) for _ in range(3)])
"""),
    "critic_loss_on_generator_output_after_generator_step": ("GT508", """
gen = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
c_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
for _ in range(2):
    fake = gen(torch.randn(5, 3))
    g_loss = -critic(fake).mean()
    c_loss = critic(fake).mean() - critic(torch.randn(5, 4)).mean()  # C
    g_opt.zero_grad()
    g_loss.backward(retain_graph=True)
    g_opt.step()
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
"""),
    "reward_model_on_encoder_output_in_method": ("GT508", """
class Trainer:
    def __init__(self):
        self.enc = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 6))
        self.reward = nn.Linear(6, 1)
        self.enc_opt = torch.optim.SGD(self.enc.parameters(), lr=0.1)
        self.rew_opt = torch.optim.SGD(self.reward.parameters(), lr=0.1)

    def step(self, x, target):
        z = self.enc(x)
        losses = {"enc": z.pow(2).mean(),
                  "reward": (self.reward(z).squeeze(1) - target).pow(2).mean()}  # C
        self.enc_opt.zero_grad()
        losses["enc"].backward(retain_graph=True)
        self.enc_opt.step()
        r_loss = losses["reward"]
        self.rew_opt.zero_grad()
        r_loss.backward()
        self.rew_opt.step()

Trainer().step(torch.randn(4, 6), torch.randn(4))
"""),
}

LOOKALIKES = {
    "gru_state_detached_before_fed_back": """
rnn = nn.GRU(3, 5, batch_first=True)
head = nn.Linear(5, 1)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
h = torch.zeros(1, 2, 5)
for step in range(3):
    out, h = rnn(torch.randn(2, 4, 3), h)
    h = h.detach()
    loss = head(out).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    "critic_loss_on_detached_generator_output": """
gen = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
critic = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
g_opt = torch.optim.Adam(gen.parameters(), lr=1e-3)
c_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
for _ in range(2):
    fake = gen(torch.randn(5, 3))
    g_loss = -critic(fake).mean()
    c_loss = critic(fake.detach()).mean() - critic(torch.randn(5, 4)).mean()
    g_opt.zero_grad()
    g_loss.backward(retain_graph=True)
    g_opt.step()
    c_opt.zero_grad()
    c_loss.backward()
    c_opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(BUGS))
def test_retained_graph_names_the_line_to_change(run_script, name):
    code, body = BUGS[name]
    src = (HEAD + body).lstrip("\n")
    line = next(i for i, t in enumerate(src.splitlines(), 1) if t.rstrip().endswith("# C"))
    res = run_script(src)
    assert res.code == 1 and "modified by an inplace operation" in res.err, res.err
    first = res.findings[0]
    assert (first["code"], first["line"]) == (code, line), (first, res.err)


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_lookalike_trains_silent(run_script, name):
    res = run_script((HEAD + LOOKALIKES[name]).lstrip("\n"))
    assert res.code == 0 and res.findings == [], (res.findings, res.err)
