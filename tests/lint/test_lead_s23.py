"""The lead's rules of session 23, from the misses of `benchmarks/injected_blind.py` (pytorch/examples
mutated blind by someone who never read the rules).

GT516, the training function that never sets train mode: a loop trains a model (inline or in a
function of the file) and evaluates it (`model.eval()` directly or in an `evaluate(model)`
helper), and nothing in the loop puts it back in train mode. A new module starts in train mode,
so the first pass trains as meant and every later one trains with dropout off and batch-norm
statistics frozen (the mnist_rnn and gcn mutations: `model.train()` removed from `train()`).
Each twin records, with a forward pre-hook, the mode of every forward run under grad: the first
is in train mode, the last in eval mode (``holds``); each look-alike trains in train mode only.

Same harness as test_heldout_shapes.py.
"""
from __future__ import annotations

import pytest
from test_heldout_shapes import Shape, _found, _run

torch = pytest.importorskip("torch")

NET = """
model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
seen = []
model.register_forward_pre_hook(lambda m, a: seen.append(m.training) if torch.is_grad_enabled() else None)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(3)]
def evaluate(model, data):
    model.eval()
    with torch.no_grad():
        return sum((model(x).argmax(1) == y).float().mean().item() for x, y in data)
"""
TRAINS_IN_EVAL = "seen[0] and not seen[-1]"
TRAINS_IN_TRAIN = "seen and all(seen)"

TWINS = [
    # a train() helper without model.train(), an evaluate() helper after it in the epoch loop
    Shape(NET + """
def train(model, opt, data):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
for epoch in range(3):
    train(model, opt, data)
    evaluate(model, data)
""", "GT516", 18, holds=TRAINS_IN_EVAL),
    # one function per epoch that trains, then evaluates at its end
    Shape(NET + """
def train_epoch(net, opt, data):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(net(x), y).backward()
        opt.step()
    return evaluate(net, data)
for epoch in range(3):
    acc = train_epoch(model, opt, data)
""", "GT516", 18, holds=TRAINS_IN_EVAL),
    # inline steps and a periodic validation inside the step loop
    Shape(NET + """
for step in range(9):
    x, y = data[step % 3]
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    if step % 3 == 2:
        acc = evaluate(model, data)
""", "GT516", 17, holds=TRAINS_IN_EVAL),
    # a trainer class: fit() steps inline and validates through a method
    Shape(NET + """
class Trainer:
    def __init__(self, model, opt):
        self.model, self.opt = model, opt
    def validate(self, data):
        self.model.eval()
        with torch.no_grad():
            return sum(self.model(x).sum().item() for x, _ in data)
    def fit(self, data, epochs):
        for epoch in range(epochs):
            for x, y in data:
                self.opt.zero_grad()
                F.cross_entropy(self.model(x), y).backward()
                self.opt.step()
            self.validate(data)
Trainer(model, opt).fit(data, 3)
""", "GT516", 24, holds=TRAINS_IN_EVAL),
]

LOOK_ALIKES = [
    # the fix: train() switches back first
    Shape(NET + """
def train(model, opt, data):
    model.train()
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
for epoch in range(3):
    train(model, opt, data)
    evaluate(model, data)
""", "GT516", holds=TRAINS_IN_TRAIN),
    # the epoch loop switches back before training
    Shape(NET + """
for epoch in range(3):
    model.train()
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    acc = evaluate(model, data)
""", "GT516", holds=TRAINS_IN_TRAIN),
    # evaluation once, after the training loop
    Shape(NET + """
for epoch in range(3):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
acc = evaluate(model, data)
""", "GT516", holds=TRAINS_IN_TRAIN),
    # the loop evaluates another model (an averaged copy), never the trained one
    Shape(NET + """
import copy
avg = copy.deepcopy(model)
for epoch in range(3):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    evaluate(avg, data)
""", "GT516", holds=TRAINS_IN_TRAIN),
    # co-training: each call trains one network and holds the other in eval mode
    Shape(NET + """
other = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
opt2 = torch.optim.SGD(other.parameters(), lr=0.1)
def train(net, net2, opt, data):
    net.train()
    net2.eval()
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(net(x) + net2(x).detach(), y).backward()
        opt.step()
for epoch in range(3):
    train(model, other, opt, data)
    train(other, model, opt2, data)
""", "GT516", holds="seen[0] and seen[1]"),
    # no layer that acts differently in eval mode: nothing changes
    Shape(NET.replace("nn.Dropout(0.5)", "nn.ReLU()") + """
for epoch in range(3):
    for x, y in data:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    evaluate(model, data)
""", "GT516", holds="seen and not seen[-1]"),
]


@pytest.mark.parametrize("i", range(len(LOOK_ALIKES)))
def test_mode_look_alike_is_silent(i: int) -> None:
    assert _found(LOOK_ALIKES[i]) == []
    _run(LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(TWINS)))
def test_mode_twin_is_reported_and_trains_in_eval_mode(i: int) -> None:
    bad = TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


# GT570: a list attribute collects graph values for a backward that runs again and again, and
# nothing empties it (the REINFORCE mutation: `del policy.saved_log_probs[:]` removed). Each
# twin raises on real torch at the second update; each look-alike runs.
AGENT = """
from torch.distributions import Categorical
class Agent:
    def __init__(self):
        self.actor, self.critic = nn.Linear(4, 2), nn.Linear(4, 1)
        self.opt = torch.optim.SGD([*self.actor.parameters(), *self.critic.parameters()], lr=0.01)
        self.log_probs, self.values, self.rewards = [], [], []
    def act(self, s):
        m = Categorical(logits=self.actor(s))
        a = m.sample()
        self.log_probs.append(m.log_prob(a))
        self.values.append(self.critic(s))
        return a.item()
"""
KEPT_TWINS = [
    Shape(AGENT + """
    def learn(self):
        loss = -torch.stack(self.log_probs).sum() * sum(self.rewards)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.rewards = []
agent = Agent()
for episode in range(3):
    for t in range(4):
        agent.act(torch.randn(4))
        agent.rewards.append(1.0)
    agent.learn()
""", "GT570", 17, raises="a second time"),
    Shape(AGENT + """
    def learn(self):
        v = torch.cat(self.values).squeeze(-1)
        loss = (v - sum(self.rewards)).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        del self.rewards[:]
        del self.log_probs[:]
agent = Agent()
for episode in range(3):
    for t in range(4):
        agent.act(torch.randn(4))
        agent.rewards.append(1.0)
    agent.learn()
""", "GT570", 20, raises="a second time"),
    Shape("""
policy = nn.Sequential(nn.Linear(4, 2), nn.LogSoftmax(-1))
policy.saved = []
opt = torch.optim.Adam(policy.parameters(), lr=0.01)
def select(state):
    logp = policy(state)
    a = int(torch.multinomial(logp.exp(), 1))
    policy.saved.append(logp[a])
    return a
def update(returns):
    loss = sum(-lp * g for lp, g in zip(policy.saved, returns))
    opt.zero_grad()
    loss.backward()
    opt.step()
while True:
    for t in range(3):
        select(torch.randn(4))
    update([1.0, 0.5, 0.2])
""", "GT570", 12, raises="a second time"),
]
KEPT_LOOK_ALIKES = [
    Shape(KEPT_TWINS[0].src.replace("        self.rewards = []\n",
                                    "        self.rewards = []\n        self.log_probs.clear()\n"),
          "GT570", holds="agent.log_probs == []"),
    Shape(KEPT_TWINS[1].src.replace("        del self.log_probs[:]\n",
                                    "        del self.log_probs[:]\n        self.values = []\n"),
          "GT570", holds="agent.values == []"),
    # one update after the episode loop: one backward through the kept graphs
    Shape(KEPT_TWINS[2].src.replace("while True:\n    for t in range(3):\n        select(torch.randn(4))\n",
                                    "for t in range(3):\n    select(torch.randn(4))\n"
                                    ).replace("    update([1.0, 0.5, 0.2])", "update([1.0, 0.5, 0.2])"),
          "GT570", holds="policy[0].weight.grad is not None"),
]


@pytest.mark.parametrize("i", range(len(KEPT_LOOK_ALIKES)))
def test_kept_list_look_alike_is_silent(i: int) -> None:
    assert _found(KEPT_LOOK_ALIKES[i]) == []
    _run(KEPT_LOOK_ALIKES[i])


@pytest.mark.parametrize("i", range(len(KEPT_TWINS)))
def test_kept_list_twin_is_reported_and_raises(i: int) -> None:
    bad = KEPT_TWINS[i]
    assert _found(bad) == [(bad.line, bad.code)], bad.src
    _run(bad)


# GT503 silent when the gradients a zero_grad() clears were already applied by a step of the
# same optimizer (a first training loop, then a second whose backward runs in a helper it does
# not see: a false alarm of session 22). The twin keeps the real bug in the second loop.
TWO_LOOPS = """
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]
def train_step(model, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    return loss.item()
for x, y in data:
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
before = model.weight.detach().clone()
"""
APPLIED_LOOK_ALIKE = Shape(TWO_LOOPS + """
for epoch in range(2):
    tr = 0.0
    for x, y in data:
        opt.zero_grad()
        tr += train_step(model, x, y)
        opt.step()
""", "GT503", holds="not torch.equal(before, model.weight)")
APPLIED_TWIN = Shape(TWO_LOOPS + """
for epoch in range(2):
    for x, y in data:
        F.mse_loss(model(x), y).backward()
        opt.zero_grad()
        opt.step()
""", "GT503", 17, holds="torch.equal(before, model.weight)")


def test_applied_gradients_cleared_is_silent() -> None:
    assert _found(APPLIED_LOOK_ALIKE) == []
    _run(APPLIED_LOOK_ALIKE)


def test_cleared_before_step_in_second_loop_is_reported() -> None:
    assert _found(APPLIED_TWIN) == [(APPLIED_TWIN.line, "GT503")]
    _run(APPLIED_TWIN)


# GT609 silent when the loss backpropagated after another optimizer's step comes from a helper
# of another module handed both models (tabsyn's CoDi: `training_with(x, trainer, trainer_dis)`
# builds each loss from one model; found on an unseen project). The twin builds the second
# loss through the stepped model in the file: its backward raises.
TWO_MODELS = """
import types
con, dis = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4)), nn.Linear(4, 4)
opt_con = torch.optim.Adam(con.parameters(), lr=0.01)
opt_dis = torch.optim.Adam(dis.parameters(), lr=0.01)
def _losses(x, con, dis):
    return con(x).pow(2).mean(), dis(x).pow(2).mean()
helpers = types.SimpleNamespace(losses=_losses)
"""
HANDED_LOOK_ALIKE = Shape(TWO_MODELS + """
for step in range(3):
    x = torch.randn(8, 4)
    loss_con, loss_dis = helpers.losses(x, con, dis)
    opt_con.zero_grad()
    loss_con.backward()
    opt_con.step()
    opt_dis.zero_grad()
    loss_dis.backward()
    opt_dis.step()
""", "GT609", holds="dis.weight.grad is not None")
HANDED_TWIN = Shape(TWO_MODELS + """
for step in range(3):
    x = torch.randn(8, 4)
    h = con(x).relu()
    loss_con = h.pow(2).mean()
    loss_dis = (dis(h) ** 2).mean()
    opt_con.zero_grad()
    loss_con.backward(retain_graph=True)
    opt_con.step()
    opt_dis.zero_grad()
    loss_dis.backward()
    opt_dis.step()
""", "GT601", 16, raises="modified by an inplace operation")


def test_losses_from_a_foreign_helper_handed_both_models_are_silent() -> None:
    assert _found(HANDED_LOOK_ALIKE) == []
    assert _found(HANDED_LOOK_ALIKE._replace(code="GT601")) == []
    _run(HANDED_LOOK_ALIKE)


def test_loss_through_the_stepped_model_is_reported() -> None:
    assert _found(HANDED_TWIN) == [(16, "GT601")]  # the retaining backward: GT601's, not GT609's
    _run(HANDED_TWIN)


# GT758 through an explicit `self.forward(x)` (daisyRec's NeuMF: `calc_loss` calls
# `self.forward` and gives its sigmoid to a BCEWithLogitsLoss kept on self): a module's
# `.forward(...)` runs that module (analysis/module_outputs.py). The twin's loss cannot go
# under -log(sigmoid(1)) = 0.313 on all-positive labels; the look-alike's goes near 0.
CALC_LOSS = """
class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.criterion = nn.BCEWithLogitsLoss()
    def forward(self, x):
        return torch.sigmoid(self.fc(x).view(-1))
    def calc_loss(self, x, y):
        pred = self.forward(x)
        return self.criterion(pred, y)
model = Scorer()
opt = torch.optim.Adam(model.parameters(), lr=0.1)
x, y = torch.randn(32, 4), torch.ones(32)
for step in range(300):
    opt.zero_grad()
    loss = model.calc_loss(x, y)
    loss.backward()
    opt.step()
"""
FORWARD_TWIN = Shape(CALC_LOSS, "GT758", 7, holds="loss.item() > 0.31")
FORWARD_LOOK_ALIKE = Shape(CALC_LOSS.replace(
    "        return torch.sigmoid(self.fc(x).view(-1))\n",
    "        return self.fc(x).view(-1)\n    def predict(self, x):\n"
    "        return torch.sigmoid(self.forward(x))\n"), "GT758", holds="loss.item() < 0.05")


def test_sigmoid_through_explicit_forward_is_reported() -> None:
    assert _found(FORWARD_TWIN) == [(7, "GT758")]
    _run(FORWARD_TWIN)


def test_logits_through_explicit_forward_are_silent() -> None:
    assert _found(FORWARD_LOOK_ALIKE) == []
    _run(FORWARD_LOOK_ALIKE)
