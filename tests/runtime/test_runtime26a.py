"""Session-26 run-time diagnoses of silent bugs (docs/triage/runtime26a.md):

- a block held in a plain list/dict attribute whose *own* submodules are the layers that ran
  (``self.rs = [ResidualBlock(16) for _ in range(4)]``): their parameters are missed by
  ``model.parameters()`` all the same, and the run names the container's line (GT401), not
  the optimizer's (GT821);
- one layer object at several positions of a container (GT843) is fused with the static
  finding that names the list multiplication (GT446), so the line that built the list leads.

Buggy twins (code + line asserted), silent look-alikes, and a variant each case does not show.
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


def _run_finding(res):
    found = [f for f in res.findings if f["source"] != "static"]
    assert found, res.err
    return found[0]


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _silent(res):
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# -- blocks in a plain container ---------------------------------------------------------------
BLOCK = """
class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.norm = nn.LayerNorm(n)

    def forward(self, x):
        return x + self.norm(self.fc(x))
"""

NESTED_BUGS = {
    # blocks (layers that own layers) in a plain list comprehension
    "list_of_blocks": BLOCK + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.blocks = [Block(8) for _ in range(3)]  # <- cause
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 1)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""",
    # variant: a dict of stages, each a Sequential (the layers that ran are two levels down)
    "dict_of_stages": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(4, 8)
        self.stages = {}  # <- cause
        for name in ("a", "b"):
            self.stages[name] = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        h = self.stem(x)
        for name in ("a", "b"):
            h = self.stages[name](h)
        return self.head(h)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 1)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""",
}

NESTED_LOOKALIKES = {
    # the same blocks in nn.ModuleList
    "module_list_of_blocks": BLOCK + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.blocks = nn.ModuleList([Block(8) for _ in range(3)])
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return self.out(h)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 1)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""",
    # a plain list of views onto registered blocks (a shortcut to iterate them)
    "plain_list_of_registered_blocks": BLOCK + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block(8)
        self.second = Block(8)
        self.order = [self.first, self.second]
        self.out = nn.Linear(8, 1)

    def forward(self, x):
        for b in self.order:
            x = b(x)
        return self.out(x)


net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(5, 8), torch.randn(5, 1)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(NESTED_BUGS))
def test_blocks_in_a_plain_container_name_the_container(run_script, name):
    src = HEAD + NESTED_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert f["code"] == "GT401", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(NESTED_LOOKALIKES))
def test_registered_blocks_are_silent(run_script, name):
    _silent(run_script(HEAD + NESTED_LOOKALIKES[name]))


# -- one layer at several positions --------------------------------------------------------------
SHARED_BUGS = {
    # the layer list multiplied inside the Sequential's arguments
    "sequential_of_multiplied_list": """
layers = ([nn.Linear(6, 16), nn.ReLU()] +
          [nn.Linear(16, 16), nn.ReLU()] * 4 +  # <- cause
          [nn.Linear(16, 2)])
model = nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(3):
    x, y = torch.randn(8, 6), torch.randint(0, 2, (8,))
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # variant: a ModuleList of one block repeated, in a module's __init__
    "module_list_of_repeated_block": """
class Tower(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8)] * depth)  # <- cause
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


model = Tower(3)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
""",
}

SHARED_LOOKALIKES = {
    # one layer called twice in forward on purpose (weight sharing), distinct layers listed
    "layer_reused_in_forward": """
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(8, 8)
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(self.shared(layer(x)))
        return x.sum(-1, keepdim=True)


model = Tied()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(3):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    opt.zero_grad()
    F.mse_loss(model(x), y).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(SHARED_BUGS))
def test_layer_repeated_by_list_multiplication_names_the_multiplication(run_script, name):
    src = HEAD + SHARED_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert f["line"] == marked_line(src), res.err
    assert {f["code"]} | {r["message"][r["message"].find("(GT") + 1:][:5] for r in f["related"]
                          if "(GT" in r["message"]} == {"GT446", "GT843"}, res.err


@pytest.mark.parametrize("name", sorted(SHARED_LOOKALIKES))
def test_layer_shared_by_calls_is_silent(run_script, name):
    _silent(run_script(HEAD + SHARED_LOOKALIKES[name]))


# -- one parameter set, two optimizers ------------------------------------------------------------
TWO_OPT = """
enc, head, critic = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)
opt_model = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-2)
opt_critic = torch.optim.Adam(CRITIC_PARAMS, lr=1e-2)
for _ in range(4):
    x, y, t = torch.randn(6, 4), torch.randn(6, 1), torch.randn(6, 1)
    h = enc(x)
    loss = F.mse_loss(head(h), y)
    v_loss = F.mse_loss(critic(h.detach()), t)
    opt_model.zero_grad()
    loss.backward()
    opt_critic.zero_grad()
    v_loss.backward()
    opt_model.step()
    opt_critic.step()
"""

TWIN_BUGS = {
    # the critic's optimizer built over the model's parameters (dreamer's shape)
    "critic_optimizer_over_model_params": TWO_OPT.replace(
        "CRITIC_PARAMS, lr=1e-2)", "list(enc.parameters()) + list(head.parameters()), "
        "lr=1e-2)  # <- cause"),
    # variant: modules listed in a helper's attribute lists, optimizers built in a method
    "method_builds_both_from_one_list": """
class Agent:
    def __init__(self):
        self.enc, self.head, self.value = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 1)

    def build(self):
        self.model_modules = [self.enc, self.head]
        self.value_modules = [self.value]
        params = lambda mods: [p for m in mods for p in m.parameters()]
        self.model_opt = torch.optim.SGD(params(self.model_modules), lr=0.1)
        self.value_opt = torch.optim.SGD(params(self.model_modules), lr=0.1)  # <- cause

    def update(self, x, y, t):
        h = self.enc(x)
        model_loss = F.mse_loss(self.head(h), y)
        value_loss = F.mse_loss(self.value(h.detach()), t)
        self.model_opt.zero_grad()
        model_loss.backward()
        self.value_opt.zero_grad()
        value_loss.backward()
        self.model_opt.step()
        self.value_opt.step()


agent = Agent()
agent.build()
for _ in range(4):
    agent.update(torch.randn(6, 4), torch.randn(6, 1), torch.randn(6, 1))
""",
}

TWIN_LOOKALIKES = {
    "critic_optimizer_over_critic_params": TWO_OPT.replace(
        "CRITIC_PARAMS", "critic.parameters()"),
    # one parameter set, two optimizers one after the other (Adam, then SGD to finish)
    "optimizer_switched_halfway": """
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
adam = torch.optim.Adam(net.parameters(), lr=1e-2)
sgd = torch.optim.SGD(net.parameters(), lr=1e-2)
for i in range(6):
    opt = adam if i < 3 else sgd
    x, y = torch.randn(6, 4), torch.randn(6, 1)
    opt.zero_grad()
    F.mse_loss(net(x), y).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(TWIN_BUGS))
def test_second_optimizer_over_the_same_parameters_is_named(run_script, name):
    src = HEAD + TWIN_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert f["code"] == "GT406", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(TWIN_LOOKALIKES))
def test_optimizers_over_their_own_parameters_are_silent(run_script, name):
    _silent(run_script(HEAD + TWIN_LOOKALIKES[name]))


# -- layers in a plain container whose weights forward reads ------------------------------------
UNCALLED_BUGS = {
    # one embedding table per node type in a plain dict, read through .weight (pyg's shape)
    "dict_of_embeddings_read_by_weight": """
class HeteroNet(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.lin = nn.Linear(4 + 2 * 3, 2)
        self.tables = {  # <- cause
            t: nn.Embedding(n, 3) for t, n in sizes.items()}

    def forward(self, x, adj):
        msgs = [adj[t] @ self.tables[t].weight for t in self.tables]
        return self.lin(torch.cat([x, *msgs], 1))


sizes = {"author": 5, "venue": 3}
net = HeteroNet(sizes)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
adj = {t: torch.rand(6, n) for t, n in sizes.items()}
for _ in range(3):
    x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
    opt.zero_grad()
    F.cross_entropy(net(x, adj), y).backward()
    opt.step()
""",
    # variant: heads in a plain list applied functionally (F.linear on their weight and bias)
    "list_of_heads_applied_functionally": """
class MultiHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.heads = [nn.Linear(8, 1) for _ in range(3)]  # <- cause

    def forward(self, x, task):
        head = self.heads[task]
        return F.linear(torch.relu(self.body(x)), head.weight, head.bias)


net = MultiHead()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(5, 4), torch.randn(5, 1)
    opt.zero_grad()
    F.mse_loss(net(x, step % 3), y).backward()
    opt.step()
""",
}

UNCALLED_LOOKALIKES = {
    "module_dict_of_embeddings": UNCALLED_BUGS["dict_of_embeddings_read_by_weight"].replace(
        "self.tables = {  # <- cause\n            t: nn.Embedding(n, 3) for t, n in sizes.items()}",
        "self.tables = nn.ModuleDict({t: nn.Embedding(n, 3) for t, n in sizes.items()})"),
    # a frozen copy kept in a plain list on purpose (hidden from parameters()), read by weight
    "frozen_reference_hidden_in_a_list": """
class Regularised(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        ref = nn.Linear(4, 4).requires_grad_(False)
        self._ref = [ref]

    def forward(self, x):
        return self.lin(x), (self.lin.weight - self._ref[0].weight).pow(2).sum()


net = Regularised()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    x = torch.randn(5, 4)
    out, reg = net(x)
    opt.zero_grad()
    (out.pow(2).mean() + 0.1 * reg).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(UNCALLED_BUGS))
def test_uncalled_layers_in_a_plain_container_name_the_container(run_script, name):
    src = HEAD + UNCALLED_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert f["code"] == "GT401", res.err
    assert _run_line(f) == marked_line(src), res.err


@pytest.mark.parametrize("name", sorted(UNCALLED_LOOKALIKES))
def test_registered_or_frozen_uncalled_layers_are_silent(run_script, name):
    _silent(run_script(HEAD + UNCALLED_LOOKALIKES[name]))


# -- a custom backward guarded by another input's flag ------------------------------------------
SYNTH = """
class Synth(torch.autograd.Function):
    @staticmethod
    def forward(ctx, low, high, g):
        ctx.save_for_backward(g)
        return F.conv_transpose1d(low, g, stride=2) + F.conv_transpose1d(high, g, stride=2)

    @staticmethod
    def backward(ctx, dy):
        dlow, dhigh = None, None
        if GUARD:
            (g,) = ctx.saved_tensors
            dlow, dhigh = F.conv1d(dy, g, stride=2), F.conv1d(dy, g, stride=2)
        return dlow, dhigh, None


high_net = nn.Conv1d(1, 1, 3, padding=1)
g = torch.tensor([[[0.7071, 0.7071]]])
opt = torch.optim.SGD(high_net.parameters(), lr=0.1)
for _ in range(3):
    low, high, target = torch.randn(4, 1, 8), torch.randn(4, 1, 8), torch.randn(4, 1, 16)
    loss = F.mse_loss(Synth.apply(low, high_net(high), g), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

LINEAR_FN = """
class MyLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x @ w.t()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        grad_x = grad_w = None
        if ctx.needs_input_grad[1]:  # <- cause
            grad_x = g @ w
        if ctx.needs_input_grad[1]:
            grad_w = g.t() @ x
        return grad_x, grad_w


enc = nn.Linear(4, 6)
w = torch.randn(3, 6)  # a fixed projection: needs no gradient
opt = torch.optim.SGD(enc.parameters(), lr=0.1)
for _ in range(3):
    x, y = torch.randn(5, 4), torch.randn(5, 3)
    loss = F.mse_loss(MyLinear.apply(enc(x), w), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

GUARD_BUGS = {
    # pytorch_wavelets' shape: both gradients computed only under input #1's flag
    "synthesis_bank_guarded_by_first_flag": SYNTH.replace(
        "if GUARD:", "if ctx.needs_input_grad[0]:  # <- cause"),
    # variant: the input's gradient guarded by the weight's flag (a copy-pasted index)
    "input_gradient_guarded_by_weight_flag": LINEAR_FN,
}


@pytest.mark.parametrize("name", sorted(GUARD_BUGS))
def test_gradient_guarded_by_another_inputs_flag_names_the_guard(run_script, name):
    src = HEAD + GUARD_BUGS[name]
    res = run_script(src)
    f = _run_finding(res)
    assert f["code"] == "GT845", res.err
    assert f["line"] == marked_line(src), res.err


def test_gradient_guarded_by_either_flag_is_silent(run_script):
    src = HEAD + SYNTH.replace(
        "if GUARD:", "if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:")
    _silent(run_script(src))


def test_none_written_in_the_return_keeps_the_return_line(run_script):
    src = HEAD + SYNTH.replace("if GUARD:", "if True:").replace(
        "return dlow, dhigh, None", "return dlow, None, None  # <- cause")
    res = run_script(src)
    f = _run_finding(res)
    assert f["code"] == "GT845", res.err
    assert f["line"] == marked_line(src), res.err
