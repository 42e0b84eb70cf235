"""Session-28 run-time diagnoses of in-place crashes (docs/triage/runtime28b.md):

- NOTE [first write that broke a saved tensor] (runtime/trace/first_write.py): several in-place
  writes each broke a saved tensor; backward() names the last, the earliest is named;
- NOTE [whole write of a viewed tensor] (runtime/trace/diagnose_alias.py): a view saved for
  backward whose base is then rewritten whole in place: the write is named; a partial
  write-back keeps the view's line;
- NOTE [layer switched to in-place after construction] (runtime/trace/root_sites.py): a layer
  built without ``inplace=True`` and turned in-place afterwards: the assignment is named;
- NOTE [error it predicts] (runtime/fuse.py): a general crash (GT839) whose error a static
  finding of the file quotes (GT619, a write into an expand() view) is led by that finding.

Buggy twins (code + line asserted), twins whose other line stays the cause, and silent
look-alikes. Real torch, in-process: every bug below crashes on real torch.
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


def _run_line(f):
    """The line the run itself named: the finding's, or (fused into a static finding that
    keeps its own line) the one of its "confirmed at run time" entry."""
    return next((r["line"] for r in f["related"] if r["message"].startswith("confirmed at run")),
                f["line"])


def _check(run_script, src, code):
    res = run_script(src)
    assert res.code != 0, res.err
    assert res.findings, res.err
    f = res.findings[0]
    assert f["code"] == code, res.err
    assert _run_line(f) == marked_line(src), res.err


def _silent(run_script, src):
    res = run_script(src)
    assert res.code == 0, res.err
    assert [f for f in res.findings if f["source"] != "static"] == [], res.err


# ---- several writes, each breaking a saved tensor (NOTE [first write that broke a saved tensor])

FIRST_WRITE_BUGS = {
    # the case's shape: two residual additions in place, each after a norm saved x
    "two_residuals": """
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc_1, self.fc_2 = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        x += self.fc_1(self.ln_1(x))  # <- cause
        x += self.fc_2(self.ln_2(x))
        return x


emb = nn.Embedding(10, 8)
block = Block(8)
x = emb(torch.randint(0, 10, (2, 5))) * 1.0
block(x).sum().backward()
""",
    # a variant the case does not show: method-form writes on a result two ops saved
    "method_writes": """
w = nn.Parameter(torch.randn(4, 3))
inp = torch.randn(2, 4)
y = torch.exp(inp @ w)
y.mul_(2)  # <- cause
z = y.sin()
y.add_(1)
(z.sum() + y.sum()).backward()
""",
}

# the earlier write broke nothing (nothing had saved the tensor yet): the later one stays
FIRST_WRITE_KEPT = {
    "earlier_write_harmless": """
lin = nn.Linear(4, 3)
x = lin(torch.randn(2, 4))
x.mul_(2)
h = x.sin()
x.add_(1)  # <- cause
h.sum().backward()
""",
}

FIRST_WRITE_LOOKALIKES = {
    "out_of_place": """
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc_1, self.fc_2 = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        x = x + self.fc_1(self.ln_1(x))
        x = x + self.fc_2(self.ln_2(x))
        return x


emb = nn.Embedding(10, 8)
block = Block(8)
x = emb(torch.randint(0, 10, (2, 5))) * 1.0
block(x).sum().backward()
""",
}


@pytest.mark.parametrize("name", sorted(FIRST_WRITE_BUGS))
def test_the_earliest_write_that_broke_a_saved_tensor_is_named(run_script, name):
    _check(run_script, HEAD + FIRST_WRITE_BUGS[name], "GT602")


@pytest.mark.parametrize("name", sorted(FIRST_WRITE_KEPT))
def test_a_harmless_earlier_write_is_not_named(run_script, name):
    _check(run_script, HEAD + FIRST_WRITE_KEPT[name], "GT602")


@pytest.mark.parametrize("name", sorted(FIRST_WRITE_LOOKALIKES))
def test_out_of_place_residuals_are_silent(run_script, name):
    _silent(run_script, HEAD + FIRST_WRITE_LOOKALIKES[name])


# ---- a saved view whose base is rewritten whole (NOTE [whole write of a viewed tensor]) ------

WHOLE_WRITE_BUGS = {
    # the case's shape: a convolution saves x.transpose(1, 2), then x += ... rewrites x
    "iadd_after_conv_of_transpose": """
class Encoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.pos_conv = nn.Conv1d(d, d, 3, padding=1)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x_conv = self.pos_conv(x.transpose(1, 2)).transpose(1, 2)
        x += x_conv  # <- cause
        return self.norm(x)


enc = Encoder(8)
x = F.dropout(nn.Linear(8, 8)(torch.randn(2, 6, 8)), 0.1)
enc(x).sum().backward()
""",
    # a variant: a method-form write of the whole base after a matmul saved a slice view
    "mul_after_sliced_matmul": """
w = nn.Parameter(torch.randn(3, 4))
h = nn.Linear(2, 3)(torch.randn(5, 2))
out = h[:2] @ w
h.mul_(0.5)  # <- cause
out.sum().backward()
""",
}

# part of the base written back: the view's line keeps the blame (where the copy belongs)
WHOLE_WRITE_KEPT = {
    "partial_write_back": """
lin = nn.Linear(8, 8)
norm = nn.LayerNorm(8)
x = lin(torch.randn(4, 3, 8))
first = x[:, 0].reshape(2, 2, 8)  # <- cause
first = first + norm(first)
x[:, 0] = first.reshape(4, 8)
x.sum().backward()
""",
}

WHOLE_WRITE_LOOKALIKES = {
    "out_of_place": """
class Encoder(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.pos_conv = nn.Conv1d(d, d, 3, padding=1)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        x_conv = self.pos_conv(x.transpose(1, 2)).transpose(1, 2)
        x = x + x_conv
        return self.norm(x)


enc = Encoder(8)
x = F.dropout(nn.Linear(8, 8)(torch.randn(2, 6, 8)), 0.1)
enc(x).sum().backward()
""",
}


@pytest.mark.parametrize("name", sorted(WHOLE_WRITE_BUGS))
def test_whole_write_of_a_viewed_tensor_names_the_write(run_script, name):
    _check(run_script, HEAD + WHOLE_WRITE_BUGS[name], "GT602")


@pytest.mark.parametrize("name", sorted(WHOLE_WRITE_KEPT))
def test_partial_write_back_keeps_the_view(run_script, name):
    _check(run_script, HEAD + WHOLE_WRITE_KEPT[name], "GT602")


@pytest.mark.parametrize("name", sorted(WHOLE_WRITE_LOOKALIKES))
def test_out_of_place_write_of_a_viewed_tensor_is_silent(run_script, name):
    _silent(run_script, HEAD + WHOLE_WRITE_LOOKALIKES[name])


# ---- a layer turned in-place after construction ----------------------------------------------
# see NOTE [layer switched to in-place after construction]

SWITCHED_BUGS = {
    # the case's shape: every ReLU turned in-place by a loop in __init__
    "loop_in_init": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.act = nn.ReLU()
        self.out = nn.Linear(8, 1)
        for m in self.modules():
            if isinstance(m, nn.ReLU):
                m.inplace = True  # <- cause

    def forward(self, x):
        h = torch.sigmoid(self.proj(x))
        g = h * 2
        return self.out(self.act(h)).sum() + g.sum()


Net()(torch.randn(3, 8)).backward()
""",
    # a variant: setattr from a function handed to Module.apply
    "setattr_through_apply": """
def make_inplace(m):
    if isinstance(m, nn.ReLU):
        setattr(m, "inplace", True)  # <- cause


net = nn.ModuleDict({"proj": nn.Linear(8, 8), "act": nn.ReLU(), "out": nn.Linear(8, 1)})
net.apply(make_inplace)
h = torch.tanh(net["proj"](torch.randn(3, 8)))
y = net["out"](net["act"](h))
y.sum().backward()
""",
}

SWITCHED_LOOKALIKES = {
    # the switched layer's input is saved by nothing (a Linear does not save its output)
    "input_not_saved": """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.act = nn.ReLU()
        self.out = nn.Linear(8, 1)
        for m in self.modules():
            if isinstance(m, nn.ReLU):
                m.inplace = True

    def forward(self, x):
        return self.out(self.act(self.proj(x))).sum()


Net()(torch.randn(3, 8)).backward()
""",
}


@pytest.mark.parametrize("name", sorted(SWITCHED_BUGS))
def test_layer_switched_to_inplace_names_the_switch(run_script, name):
    _check(run_script, HEAD + SWITCHED_BUGS[name], "GT602")


@pytest.mark.parametrize("name", sorted(SWITCHED_LOOKALIKES))
def test_switched_layer_whose_input_is_not_saved_is_silent(run_script, name):
    _silent(run_script, HEAD + SWITCHED_LOOKALIKES[name])


# ---- a general crash whose error a static finding of the file predicts -----------------------
# see NOTE [error it predicts]

PREDICTED_BUGS = {
    # the case's shape: marginals floored by masked assignment into expand() views; backward()
    # raises, far from the write
    "masked_floor_on_expand": """
def pair_loss(x, y, eps=1e-3):
    k = x.shape[1]
    joint = (x.unsqueeze(2) * y.unsqueeze(1)).sum(0)
    joint = joint / joint.sum()
    p_i = joint.sum(dim=1).view(k, 1).expand(k, k)
    p_i[(p_i < eps).data] = eps  # <- cause
    return -(joint * (torch.log(joint) - torch.log(p_i))).sum()


head = nn.Sequential(nn.Linear(6, 4), nn.Softmax(dim=1))
loss = pair_loss(head(torch.randn(8, 6)), head(torch.randn(8, 6)))
loss.backward()
""",
    # a variant: a buffer registered as an expand() view, updated in place in forward()
    "buffer_registered_as_expand": """
class Whiten(nn.Module):
    def __init__(self, c, groups):
        super().__init__()
        self.lin = nn.Linear(c, c)
        self.register_buffer("running", torch.eye(c).expand(groups, c, c))  # <- cause

    def forward(self, x):
        y = self.lin(x)
        cov = (y.t() @ y / len(y)).detach()
        self.running.copy_(0.9 * self.running + 0.1 * cov)
        return y


Whiten(4, 2)(torch.randn(5, 4)).sum().backward()
""",
}

PREDICTED_LOOKALIKES = {
    "cloned_expand": """
def pair_loss(x, y, eps=1e-3):
    k = x.shape[1]
    joint = (x.unsqueeze(2) * y.unsqueeze(1)).sum(0)
    joint = joint / joint.sum()
    p_i = joint.sum(dim=1).view(k, 1).expand(k, k).clone()
    p_i[(p_i < eps).data] = eps
    return -(joint * (torch.log(joint) - torch.log(p_i))).sum()


head = nn.Sequential(nn.Linear(6, 4), nn.Softmax(dim=1))
loss = pair_loss(head(torch.randn(8, 6)), head(torch.randn(8, 6)))
loss.backward()
""",
}


@pytest.mark.parametrize("name", sorted(PREDICTED_BUGS))
def test_general_crash_led_by_the_static_finding_that_predicts_it(run_script, name):
    src = HEAD + PREDICTED_BUGS[name]
    res = run_script(src)
    assert res.code != 0 and res.findings, res.err
    f = res.findings[0]
    assert (f["code"], f["line"], f["source"]) == ("GT619", marked_line(src), "static+runtime"), \
        res.err


@pytest.mark.parametrize("name", sorted(PREDICTED_LOOKALIKES))
def test_cloned_expand_is_silent(run_script, name):
    _silent(run_script, HEAD + PREDICTED_LOOKALIKES[name])


# ---- a carried state reset in place ------------------------------------------------------------
# see NOTE [state reset in place keeps its graph]

RESET_BUGS = {
    # the case's shape: a layer's state buffer zeroed in place by a reset method
    "buffer_zeroed_by_reset": """
class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("v", torch.zeros(2, 4))

    def reset(self):
        for b in self.buffers():
            b.zero_()  # <- cause

    def forward(self, x):
        v = self.v
        for t in range(x.shape[1]):
            v = 0.9 * v + x[:, t]
        self.v = v
        return v


lin, cell = nn.Linear(3, 4), Leaky()
for _ in range(2):
    cell.reset()
    out = cell(lin(torch.randn(2, 5, 3)))
    out.sum().backward()
""",
    # a variant: a hidden state carried in a loop variable, reset with fill_ per sequence
    "hidden_filled_in_loop": """
rnn = nn.RNNCell(3, 4)
h = torch.zeros(2, 4)
for seq in range(3):
    h.fill_(0.0)  # <- cause
    for t in range(4):
        h = rnn(torch.randn(2, 3), h)
    h.pow(2).sum().backward()
""",
}

RESET_LOOKALIKES = {
    "detached_before_zeroing": """
class Leaky(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("v", torch.zeros(2, 4))

    def reset(self):
        for b in self.buffers():
            b.detach_().zero_()

    def forward(self, x):
        v = self.v
        for t in range(x.shape[1]):
            v = 0.9 * v + x[:, t]
        self.v = v
        return v


lin, cell = nn.Linear(3, 4), Leaky()
for _ in range(2):
    cell.reset()
    out = cell(lin(torch.randn(2, 5, 3)))
    out.sum().backward()
""",
}


@pytest.mark.parametrize("name", sorted(RESET_BUGS))
def test_state_reset_in_place_names_the_reset(run_script, name):
    _check(run_script, HEAD + RESET_BUGS[name], "GT506")


@pytest.mark.parametrize("name", sorted(RESET_LOOKALIKES))
def test_state_detached_before_reset_is_silent(run_script, name):
    _silent(run_script, HEAD + RESET_LOOKALIKES[name])


# ---- a detaching method called outside the backward's loop -------------------------------------
# see NOTE [detach called outside the backward's loop]

_CARRIER = """
class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(3, 4)
        self.head = nn.Linear(4, 1)
        self.state = None

    def forward(self, x):
        if self.state is None:
            self.state = torch.zeros(x.shape[0], 4)
        self.state = self.cell(x, self.state)
        return self.head(self.state)

    def reset_graph(self):
        if self.state is not None:
            self.state = self.state.detach()


net = Tracker()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
"""

DETACH_LEVEL_BUGS = {
    # the case's shape: detached once per sequence, backward per frame
    "once_per_sequence": _CARRIER + """
for video in range(2):
    net.reset_graph()  # <- cause
    for frame in range(3):
        loss = net(torch.randn(2, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
    # a variant: in a training function, called before a while loop over batches
    "before_while_in_function": _CARRIER + """
def train(epochs):
    for epoch in range(epochs):
        net.reset_graph()  # <- cause
        batch = 0
        while batch < 3:
            opt.zero_grad()
            net(torch.randn(2, 3)).sum().backward()
            opt.step()
            batch += 1


train(2)
""",
}

DETACH_LEVEL_LOOKALIKES = {
    "called_per_pass": _CARRIER + """
for video in range(2):
    for frame in range(3):
        net.reset_graph()
        loss = net(torch.randn(2, 3)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(DETACH_LEVEL_BUGS))
def test_detach_called_outside_the_backward_loop_names_the_call(run_script, name):
    _check(run_script, HEAD + DETACH_LEVEL_BUGS[name], "GT506")


@pytest.mark.parametrize("name", sorted(DETACH_LEVEL_LOOKALIKES))
def test_detach_called_per_pass_is_silent(run_script, name):
    _silent(run_script, HEAD + DETACH_LEVEL_LOOKALIKES[name])
