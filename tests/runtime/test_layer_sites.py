"""A torch layer's op named at the line that built the layer (NOTE [layer built here]): the
run charges a layer's ops to the line that called it (or the container holding it), so an
in-place layer (GT602, GT832) or a softmax/sigmoid layer before a loss that applies its own
(GT758, GT837) was named at ``self.main(x)``; the registration hook keeps where each torch
layer was registered, and a container's call is mapped to its argument's line. Buggy twins in
spellings other than the real-world cases (dreamgonfly GAN tutorial, singd, the Sequential
softmax tutorial), and correct look-alikes with the same containers that stay silent. Real
torch, in-process.
"""
from __future__ import annotations

import pytest
from rt_helpers import marked_line

HEAD = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
"""

CRASHES = {
    # the second in-place Dropout overwrites the sigmoid's output, which sigmoid saved: the
    # run knows which of the two identical layers wrote (the first one is harmless here)
    "inplace_dropout_after_sigmoid_in_sequential": ("GT602", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(6, 16), nn.ReLU(),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(16, 8),
            nn.Sigmoid(),
            nn.Dropout(0.2, inplace=True),  # <- cause
            nn.Linear(8, 3))

    def forward(self, inp):
        return self.main(inp)

net = Net()
F.cross_entropy(net(x), y).backward()
"""),
    # an in-place Hardtanh in a ModuleList, after a Tanh that saved its output: the user's loop
    # calls the layer (no Sequential), the constructor comes from the static reading still
    "inplace_hardtanh_in_module_list": ("GT602", """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.acts = nn.ModuleList([nn.Tanh(),
                                   nn.Hardtanh(-0.5, 0.5, inplace=True)])  # <- cause

    def forward(self, inp):
        h = self.fc(inp)
        for act in self.acts:
            h = act(h)
        return h

F.cross_entropy(Net()(x), y).backward()
"""),
    # an in-place ReLU right after a layer a gradient recorder hooked (full backward hook)
    "inplace_relu_after_hooked_linear": ("GT832", """
class Recorder:
    def __init__(self, model):
        self.grads = {}
        for name, m in model.named_modules():
            if isinstance(m, nn.Linear):
                m.register_full_backward_hook(self.keep(name))

    def keep(self, name):
        def hook(module, grad_input, grad_output):
            self.grads[name] = grad_output[0].detach()
        return hook

model = nn.Sequential(nn.Linear(6, 3),
                      nn.ReLU(inplace=True))  # <- cause
rec = Recorder(model)
F.cross_entropy(model(x), y).backward()
"""),
}

SILENT_BUGS = {
    # an nn.Softmax ending the model, fed to cross_entropy
    "softmax_layer_in_sequential": ("GT758", """
model = nn.Sequential(
    nn.Linear(6, 16),
    nn.ReLU(),
    nn.Linear(16, 3),
    nn.Softmax(dim=1),  # <- cause
)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
"""),
    # an nn.Sigmoid ending the model, fed to BCEWithLogitsLoss
    "sigmoid_layer_before_bce_with_logits": ("GT837", """
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
model.add_module("out", nn.Sigmoid())  # <- cause
crit = nn.BCEWithLogitsLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    crit(model(x).squeeze(1), (y > 0).float()).backward()
    opt.step()
"""),
}

LOOKALIKES = {
    # in-place layers after layers that do not save their output
    "inplace_layers_after_linear": """
model = nn.Sequential(
    nn.Linear(6, 16),
    nn.ReLU(inplace=True),
    nn.Linear(16, 16),
    nn.Dropout(0.2, inplace=True),
    nn.Linear(16, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
""",
    # a LogSoftmax layer fed to nll_loss; a Softmax layer used for the predictions only
    "log_softmax_layer_into_nll": """
model = nn.Sequential(nn.Linear(6, 3),
                      nn.LogSoftmax(dim=1))
probs = nn.Softmax(dim=1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    out = model(x)
    F.nll_loss(out, y).backward()
    opt.step()
    pred = probs(out.detach()).argmax(1)
""",
    # a Sigmoid layer fed to BCELoss (probabilities), in a ModuleList
    "sigmoid_layer_into_bce": """
layers = nn.ModuleList([nn.Linear(6, 1),
                        nn.Sigmoid()])
opt = torch.optim.SGD(layers.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    h = x
    for layer in layers:
        h = layer(h)
    F.binary_cross_entropy(h.squeeze(1), (y > 0).float()).backward()
    opt.step()
""",
}


@pytest.mark.parametrize("name", sorted(CRASHES))
def test_crash_named_at_the_layer(name, run_script):
    code, body = CRASHES[name]
    src = HEAD + body
    res = run_script(src)
    assert res.code != 0
    assert res.findings, res.err
    first = res.findings[0]
    assert (first["code"], first["line"], first["path"]) == (code, marked_line(src), "prog.py"), \
        res.findings


@pytest.mark.parametrize("name", sorted(SILENT_BUGS))
def test_silent_bug_named_at_the_layer(name, run_script):
    code, body = SILENT_BUGS[name]
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
    assert not res.findings, res.findings
