"""Session-26 run-time diagnoses from the held-out 20 batch (docs/triage/runtime26c.md):

- an in-place write through a view (a slice, a reshape) of a tensor an op saved for backward
  (runtime/trace/view_write.py): the write is named, not the op that saved the tensor;
- a layer nested inside a layer held in a plain dict/list (runtime/trace/hooks.py
  unregistered_owner), the container assigned in a base class's ``__init__``
  (runtime/trace/attribute_site.py): the container's line is named;
- parameters left out of the one optimizer whose list enumerates one module picked by name
  (``opt_model = self.model``, then ``opt_model.named_parameters()``), also when the optimizer
  is built in a factory method (runtime/trace/param_lists.py chosen_at): the pick is named;
- ``torch.tensor([t, ...], requires_grad=True)`` over tensors that require grad copies their
  values into a new leaf (runtime/trace/provenance.py ``_ctor``, NOTE [copied leaf]): named;
- a dead loss term (computed under ``no_grad`` from the trained model) added IN PLACE to the
  live loss (``loss += term``, ``loss.add_(term)``; runtime/trace/mode_checks.py
  ``_dead_iadd``, NOTE [dead loss term]): the statement in the no_grad block is named.

Buggy twins (code + line asserted), variants the case does not show, and silent look-alikes.
Real torch, in-process: every bug below crashes at backward() on real torch.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
"""

VIEW_WRITE_BUGS = {
    # twin: a net ending in ReLU (saves its output); a slice of a reshape of the output is
    # scaled in place
    "slice_of_relu_output_divided": """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU())

    def forward(self, x):
        params = self.net(x).reshape(x.shape[0], 3, 4)
        scale, shift = params[..., :2], params[..., 2:]
        scale /= 2.0  # <- cause
        return (x[:, :3, None] * scale.exp() + shift).sum(-1)


head = Head()
opt = torch.optim.Adam(head.parameters(), lr=1e-3)
loss = head(torch.randn(8, 4)).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # variant: sigmoid saves its output; a column slice is written with a method call
    "column_of_sigmoid_output_mul_": """
lin = nn.Linear(5, 6)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
gates = torch.sigmoid(lin(torch.randn(3, 5)))
gates[:, :2].mul_(0.5)  # <- cause
loss = gates.sum()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # variant: the op saved its INPUT (a product saves both factors); a reshaped view of that
    # input is written in place after the product was taken
    "view_of_saved_input_added_to": """
lin = nn.Linear(4, 6)
w = nn.Parameter(torch.randn(3, 6))
opt = torch.optim.SGD([*lin.parameters(), w], lr=0.1)
h = lin(torch.randn(3, 4))
y = h * w
flat = h.view(-1)
flat[:4] += 1.0  # <- cause
loss = (y.sum() + h.sum())
opt.zero_grad()
loss.backward()
opt.step()
""",
}

LOOKALIKES = {
    # the fix of the twin: scale out of place
    "slice_scaled_out_of_place": """
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU())

    def forward(self, x):
        params = self.net(x).reshape(x.shape[0], 3, 4)
        scale, shift = params[..., :2], params[..., 2:]
        scale = scale / 2.0
        return (x[:, :3, None] * scale.exp() + shift).sum(-1)


head = Head()
opt = torch.optim.Adam(head.parameters(), lr=1e-3)
loss = head(torch.randn(8, 4)).pow(2).mean()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # a copy of the slice is written in place: the saved output is untouched
    "cloned_slice_written": """
lin = nn.Linear(5, 6)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
gates = torch.sigmoid(lin(torch.randn(3, 5)))
part = gates[:, :2].clone()
part.mul_(0.5)
loss = gates.sum() + part.sum()
opt.zero_grad()
loss.backward()
opt.step()
""",
    # the view is written BEFORE the product takes the tensor: the product saves the new values
    "view_written_before_the_save": """
lin = nn.Linear(4, 6)
w = nn.Parameter(torch.randn(3, 6))
opt = torch.optim.SGD([*lin.parameters(), w], lr=0.1)
h = lin(torch.randn(3, 4))
flat = h.view(-1)
flat[:4] += 1.0
y = h * w
loss = (y.sum() + h.sum())
opt.zero_grad()
loss.backward()
opt.step()
""",
}


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _run_line(f):
    """The line the run itself named (its own, or its "confirmed at run time" entry)."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


@pytest.mark.parametrize("name", sorted(VIEW_WRITE_BUGS))
def test_write_through_a_view_of_a_saved_tensor_is_named(run_script, name):
    src = HEAD + VIEW_WRITE_BUGS[name]
    res = run_script(src)
    assert res.code != 0, res.err  # real torch: "modified by an inplace operation"
    assert "modified by an inplace operation" in res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] == "GT602", res.err


@pytest.mark.parametrize("name", sorted(LOOKALIKES))
def test_view_writes_that_do_not_touch_a_saved_tensor_are_silent(run_script, name):
    res = run_script(HEAD + LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_model_with_view_write_still_pickles_and_deepcopies(run_script, tmp_path):
    """The stamp lives on graph nodes only: the module, its state and a deepcopy are ours-free."""
    src = HEAD + """
import copy, io, pickle
lin = nn.Linear(5, 6)
gates = torch.sigmoid(lin(torch.randn(3, 5)))
gates[:, :2].mul_(0.5)
buf = io.BytesIO()
torch.save(lin, buf)
pickle.dumps(lin)
copy.deepcopy(lin)
torch.save(gates.detach(), io.BytesIO())
print("ok")
"""
    res = run_script(src)
    assert res.code == 0, res.err


WRAP = """
class Table(nn.Module):
    def __init__(self, n, dim=4):
        super().__init__()
        self.emb = nn.Embedding(n, dim)

    def forward(self, idx):
        return self.emb(idx)
"""

CONTAINER_BUGS = {
    # twin: wrappers of embeddings in a plain dict assigned by the base class
    "nested_layers_in_base_class_dict": WRAP + """
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = {}  # <- cause


class Model(Base):
    def __init__(self):
        super().__init__()
        for k in ("user", "item"):
            self.tables[k] = Table(10)
        self.head = nn.Linear(8, 1)

    def forward(self, u, i):
        return self.head(torch.cat([self.tables["user"](u), self.tables["item"](i)], -1))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    u, i = torch.randint(0, 10, (6,)), torch.randint(0, 10, (6,))
    loss = model(u, i).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: blocks (Sequential of layers) in a plain list of the class itself
    "sequential_blocks_in_plain_list": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(2)]  # <- cause
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.out(x)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: direct layers in a plain list assigned by a base class
    "layers_in_base_class_list": """
class Base(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(n)]  # <- cause


class Net(Base):
    def __init__(self):
        super().__init__(2)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.out(x)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}

CONTAINER_LOOKALIKES = {
    # the fix: nn.ModuleDict in the base class
    "nested_layers_in_module_dict": WRAP + """
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleDict()


class Model(Base):
    def __init__(self):
        super().__init__()
        for k in ("user", "item"):
            self.tables[k] = Table(10)
        self.head = nn.Linear(8, 1)

    def forward(self, u, i):
        return self.head(torch.cat([self.tables["user"](u), self.tables["item"](i)], -1))


model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    u, i = torch.randint(0, 10, (6,)), torch.randint(0, 10, (6,))
    loss = model(u, i).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a plain list that only aliases registered blocks (an order of application)
    "plain_list_of_registered_blocks": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.b = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.order = [self.b, self.a]
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        for blk in self.order:
            x = blk(x)
        return self.out(x)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    loss = net(torch.randn(5, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(CONTAINER_BUGS))
def test_layer_inside_a_plain_container_names_the_container(run_script, name):
    src = HEAD + CONTAINER_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] == "GT401", res.err


@pytest.mark.parametrize("name", sorted(CONTAINER_LOOKALIKES))
def test_registered_containers_are_silent(run_script, name):
    res = run_script(HEAD + CONTAINER_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_nested_container_layers_stay_out_of_parameters_on_real_torch():
    """The claim behind the twin: a module inside a plain dict is not registered."""
    import torch.nn as nn

    class Base(nn.Module):
        def __init__(self):
            super().__init__()
            self.tables = {"a": nn.Sequential(nn.Embedding(3, 2))}

    assert list(Base().parameters()) == []
    assert list(nn.ModuleDict({"a": nn.Sequential(nn.Embedding(3, 2))}).parameters())


ENCODER_AND_LOSS = """
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(50, 8, mode="mean")

    def forward(self, ids):
        return self.emb(ids)


class PairLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.classifier = nn.Linear(16, 3)

    def forward(self, a, b, labels):
        return F.cross_entropy(self.classifier(torch.cat([self.model(a), self.model(b)], 1)), labels)


def batches(n=4):
    return [(torch.randint(0, 50, (6, 5)), torch.randint(0, 50, (6, 5)), torch.randint(0, 3, (6,)))
            for _ in range(n)]
"""

PICK_BUGS = {
    # twin: a trainer's factory method groups the parameters of the model it picked
    "factory_groups_parameters_of_picked_model": ENCODER_AND_LOSS + """
class Trainer:
    def __init__(self, model, loss):
        self.model, self.loss = model, loss

    def create_optimizer(self):
        opt_model = self.model  # <- cause
        groups = [{"params": [p for n, p in opt_model.named_parameters() if "bias" not in n]},
                  {"params": [p for n, p in opt_model.named_parameters() if "bias" in n],
                   "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=1e-2)
        return self.optimizer

    def train(self):
        optimizer = self.create_optimizer()
        for a, b, y in batches():
            loss = self.loss(a, b, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


enc = Encoder()
Trainer(enc, PairLoss(enc)).train()
""",
    # variant: the pick is a conditional, and the list and optimizer are in the same function
    "conditional_pick_in_the_training_function": ENCODER_AND_LOSS + """
def fit(model, loss_model, wrapped=None):
    target = wrapped if wrapped is not None else loss_model.model  # <- cause
    params = [p for p in target.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    for a, b, y in batches():
        loss = loss_model(a, b, y)
        opt.zero_grad()
        loss.backward()
        opt.step()


enc = Encoder()
fit(enc, PairLoss(enc))
""",
}

PICK_LOOKALIKES = {
    # the fix: the loss module (which holds the model) is the one picked
    "factory_picks_the_loss_module": ENCODER_AND_LOSS + """
class Trainer:
    def __init__(self, model, loss):
        self.model, self.loss = model, loss

    def create_optimizer(self):
        opt_model = self.loss
        groups = [{"params": [p for n, p in opt_model.named_parameters() if "bias" not in n]},
                  {"params": [p for n, p in opt_model.named_parameters() if "bias" in n],
                   "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=1e-2)
        return self.optimizer

    def train(self):
        optimizer = self.create_optimizer()
        for a, b, y in batches():
            loss = self.loss(a, b, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


enc = Encoder()
Trainer(enc, PairLoss(enc)).train()
""",
}

# a factory given the model as an argument: no pick inside it, the call that passed the
# model keeps the finding
FACTORY_ARGUMENT_BUG = ENCODER_AND_LOSS + """
def make_optimizer(model):
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(params, lr=0.1)


enc = Encoder()
crit = PairLoss(enc)
opt = make_optimizer(enc)  # <- cause
for a, b, y in batches():
    loss = crit(a, b, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("name", sorted(PICK_BUGS))
def test_parameters_of_a_picked_module_name_the_pick(run_script, name):
    src = HEAD + PICK_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] == "GT821", res.err


@pytest.mark.parametrize("name", sorted(PICK_LOOKALIKES))
def test_picking_the_module_that_holds_everything_is_silent(run_script, name):
    res = run_script(HEAD + PICK_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_factory_given_the_model_keeps_the_call_line(run_script):
    src = HEAD + FACTORY_ARGUMENT_BUG
    res = run_script(src)
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] == "GT821", res.err


LIST_COPY_BUGS = {
    # twin: REINFORCE keeps per-step log-probabilities in a list and rebuilds them as a leaf
    "log_probs_list_rebuilt_as_leaf": """
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for episode in range(3):
    log_probs, rewards = [], []
    for s in torch.randn(6, 4):
        dist = torch.distributions.Categorical(logits=net(s))
        a = dist.sample()
        log_probs.append(dist.log_prob(a))
        rewards.append(float(a.item() == 1))
    lp = torch.tensor(log_probs, requires_grad=True)  # <- cause
    loss = -(lp * torch.tensor(rewards)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: two loss terms gathered into one tensor to be summed
    "loss_terms_gathered_into_a_leaf": """
enc = nn.Linear(5, 3)
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
for _ in range(3):
    x = torch.randn(8, 5)
    z = enc(x)
    rec, reg = (z - 1).pow(2).mean(), z.abs().mean()
    loss = torch.tensor([rec, 0.1 * reg], requires_grad=True).sum()  # <- cause
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}

LIST_COPY_LOOKALIKES = {
    # the fix: torch.stack keeps the graph
    "log_probs_stacked": """
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for episode in range(3):
    log_probs, rewards = [], []
    for s in torch.randn(6, 4):
        dist = torch.distributions.Categorical(logits=net(s))
        a = dist.sample()
        log_probs.append(dist.log_prob(a))
        rewards.append(float(a.item() == 1))
    lp = torch.stack(log_probs)
    loss = -(lp * torch.tensor(rewards)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a learnable leaf built from plain numbers, held by the optimizer
    "learnable_weights_from_numbers": """
enc = nn.Linear(5, 3)
mix = torch.tensor([1.0, 0.1], requires_grad=True)
opt = torch.optim.SGD([*enc.parameters(), mix], lr=0.1)
for _ in range(3):
    z = enc(torch.randn(8, 5))
    loss = (mix * torch.stack([(z - 1).pow(2).mean(), z.abs().mean()])).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(LIST_COPY_BUGS))
def test_list_of_graph_tensors_copied_into_a_leaf_is_named(run_script, name):
    src = HEAD + LIST_COPY_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(LIST_COPY_LOOKALIKES))
def test_stacked_or_numeric_leaves_are_silent(run_script, name):
    res = run_script(HEAD + LIST_COPY_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


def test_list_copy_drops_the_graph_on_real_torch():
    import torch

    w = torch.ones(2, requires_grad=True)
    parts = [(w * 2).sum(), (w * 3).sum()]
    copy = torch.tensor(parts, requires_grad=True)
    assert copy.is_leaf and copy.grad_fn is None
    copy.sum().backward()
    assert w.grad is None and copy.grad is not None


DEAD_IADD_BUGS = {
    "term_added_in_place": """
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = F.mse_loss(net(x), y)
    with torch.no_grad():  # <- cause (NOTE [block of one statement])
        smooth = net(x + 0.01 * torch.randn_like(x)).sub(net(x)).pow(2).mean()
    loss += 0.1 * smooth
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # variant: the penalty is computed in a helper under no_grad, added with add_
    "helper_term_added_with_add_": """
def consistency(model, x):
    with torch.no_grad():  # <- cause
        return model(x.flip(0)).var()


net = nn.Linear(4, 2)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = F.mse_loss(net(x), y)
    loss.add_(consistency(net, x), alpha=0.5)
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
}

DEAD_IADD_LOOKALIKES = {
    # a frozen teacher's constant added in place: not the trained model's output
    "frozen_teacher_constant": """
net, teacher = nn.Linear(4, 2), nn.Linear(4, 2).requires_grad_(False)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = F.mse_loss(net(x), y)
    with torch.no_grad():
        offset = teacher(x).pow(2).mean()
    loss += offset
    opt.zero_grad()
    loss.backward()
    opt.step()
""",
    # a total for the logs, never back-propagated
    "logged_total_in_place": """
net = nn.Linear(4, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
logged = []
for _ in range(3):
    x, y = torch.randn(8, 4), torch.randn(8, 2)
    loss = F.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        val = net(x).sub(y).abs().mean()
    total = loss.clone()
    total += val
    logged.append(total.item())
""",
}


@pytest.mark.parametrize("name", sorted(DEAD_IADD_BUGS))
def test_dead_term_added_in_place_is_named(run_script, name):
    src = HEAD + DEAD_IADD_BUGS[name]
    res = run_script(src)
    assert res.code == 0, res.err
    f = _run_finding(res)
    assert _run_line(f) == marked_line(src), res.err
    assert f["code"] == "GT844", res.err


@pytest.mark.parametrize("name", sorted(DEAD_IADD_LOOKALIKES))
def test_in_place_additions_that_are_not_dead_terms_are_silent(run_script, name):
    res = run_script(HEAD + DEAD_IADD_LOOKALIKES[name])
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err
