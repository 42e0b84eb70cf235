"""GAN steps split over two helpers handed one generator output (NOTE [GAN steps in helpers]):
the discriminator helper's undetached `D(fake)` (GT508), with its look-alikes. On torch 2.13
the buggy twin raises 'Trying to backward through the graph a second time' at the second
helper's backward (run by hand: /tmp/lead51/probe2/q3_gan.py)."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source

FUNCS = '''
import torch
import torch.nn as nn

G = nn.Sequential(nn.Linear(8, 4))
D = nn.Sequential(nn.Linear(4, 1))
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
bce = nn.BCEWithLogitsLoss()


def d_step(real, fake):
    opt_d.zero_grad(){rebind}
    loss = bce(D(real), torch.ones(16, 1)) + bce(D({fake}), torch.zeros(16, 1))
    loss.backward()
    opt_d.step()


def g_step(fake):
    opt_g.zero_grad()
    loss = bce(D(fake), torch.ones(16, 1))
    loss.backward()
    opt_g.step()


for it in range(5):
    real = torch.randn(16, 4)
    fake = G(torch.randn(16, 8)){between}
    {calls}
'''
ORDER = "d_step(real, fake)\n    g_step(fake)"


def _gt508(fake="fake", rebind="", between="", calls=ORDER) -> list[int]:
    src = textwrap.dedent(FUNCS).format(fake=fake, rebind=rebind, between=between, calls=calls)
    return [f.line for f in check_source(src, "gan.py") if f.code == "GT508"]


def test_the_discriminator_helper_is_named():
    assert _gt508() == [14]
    # the generator step first: it frees the graph the discriminator step then needs
    assert _gt508(calls="g_step(fake)\n    d_step(real, fake)") == [14]
    # keyword arguments, another parameter order
    assert _gt508(calls="d_step(fake=fake, real=real)\n    g_step(fake)") == [14]


def test_look_alikes_stay_silent():
    assert _gt508(fake="fake.detach()") == []
    assert _gt508(rebind="\n    fake = fake.detach()") == []
    assert _gt508(calls="d_step(real, fake.detach())\n    g_step(fake)") == []
    # the generator output made anew between the two steps: a fresh graph
    assert _gt508(between="", calls="d_step(real, fake)\n    fake = G(torch.randn(16, 8))\n"
                  "    g_step(fake)") == []


METHODS = '''
import torch
import torch.nn as nn


class GanTrainer:
    def __init__(self):
        self.G = nn.Linear(8, 4)
        self.D = nn.Linear(4, 1)
        self.opt_g = torch.optim.Adam(self.G.parameters())
        self.opt_d = torch.optim.Adam(self.D.parameters())

    def train_discriminator(self, real, fake):
        self.opt_d.zero_grad()
        loss = -(self.D(real).mean() - self.D({fake}).mean())
        loss.backward({retain})
        self.opt_d.step()

    def train_generator(self, fake):
        self.opt_g.zero_grad()
        loss = -self.D(fake).mean()
        loss.backward()
        self.opt_g.step()

    def fit(self, loader):
        for real in loader:
            fake = self.G(torch.randn(real.size(0), 8))
            self.train_discriminator(real, fake)
            self.train_generator(fake)
'''


def test_methods_of_a_trainer_class():
    def run(fake="fake", retain=""):
        src = textwrap.dedent(METHODS).format(fake=fake, retain=retain)
        return [(f.code, f.line) for f in check_source(src, "t.py") if f.code == "GT508"]
    assert run() == [("GT508", 15)]
    assert run(fake="fake.detach()") == []
    assert run(retain="retain_graph=True") == []


SALIENCY = '''
import torch
import torch.nn as nn


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
enc = Enc(){freeze}


def saliency(x):
    {make}
    feats.requires_grad = True
    net[2](net[1](feats)).sum().backward()
    return feats.grad
'''


def _gt303(make: str, freeze: str = "") -> list[int]:
    src = textwrap.dedent(SALIENCY).format(make=make, freeze=freeze)
    return [f.line for f in check_source(src, "s.py") if f.code == "GT303"]


def test_flag_on_the_output_of_a_layer_with_weights():
    # NOTE [weighted modules]: torch 2.13 raises "you can only change requires_grad flags of
    # leaf variables" on each of these
    assert _gt303("feats = net[0](x)") == [21]
    assert _gt303("feats = net(x)") == [21]
    assert _gt303("feats = enc(x)") == [21]


def test_flag_on_a_leaf_output_stays_silent():
    assert _gt303("feats = net[1](x)") == []  # Tanh holds no parameter: a leaf in, a leaf out
    assert _gt303("feats = net[0](x).detach()") == []
    assert _gt303("with torch.no_grad():\n        feats = net[0](x)") == []
    # the file freezes the network: its output may be a leaf on purpose
    assert _gt303("feats = net[0](x)", freeze="\nnet.requires_grad_(False)") == []


TRAINER = '''
import torch
import torch.nn as nn


class Trainer:
    def __init__(self):
        self.model = self.build_model()
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)

    def build_model(self):
        return nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4))

    def resume(self, path):
        self.model = self.build_model(){rebuild}
        self.model.load_state_dict(torch.load(path))

    def fit(self, loader):
        for x, y in loader:
            loss = nn.functional.cross_entropy(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
'''


def test_model_rebuilt_by_a_method_helper_in_another_method():
    def run(rebuild=""):
        src = textwrap.dedent(TRAINER).format(rebuild=rebuild)
        return [(f.code, f.line) for f in check_source(src, "t.py") if f.code == "GT404"]
    # `self.build_model()` read in `resume`'s own scope (it returns a new nn.Sequential)
    assert run() == [("GT404", 15)]
    assert run(rebuild="\n        self.optimizer = torch.optim.AdamW(self.model.parameters())") == []


LEAK = '''
import torch
import torch.nn as nn


def evaluate(model, x):
    model.eval()
    model.requires_grad_(False){undo}
    out = model(x).argmax(1)
    model.train()
    return out


def freeze(net):
    for p in net.parameters():
        p.requires_grad = False


model = nn.Linear(4, 3)
teacher = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 4)
for epoch in range(3):
    loss = (model(x) - teacher(x)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    {call}
'''


def _gt427(call: str, undo: str = "") -> list[tuple[int, int]]:
    src = textwrap.dedent(LEAK).format(call=call, undo=undo)
    return [(f.line, f.related[0].line) for f in check_source(src, "e.py") if f.code == "GT427"]


def test_a_freeze_left_by_a_helper_the_loop_calls():
    # on torch 2.13 the second epoch's backward raises "element 0 of tensors does not require
    # grad" (/tmp/lead51/probe4/s3_freeze_in_eval.py)
    assert _gt427("print(evaluate(model, x))") == [(8, 28)]
    assert _gt427("freeze(model)") == [(16, 28)]


def test_a_freeze_undone_or_of_another_model_stays_silent():
    assert _gt427("print(evaluate(model, x))", undo="\n    model.requires_grad_(True)") == []
    assert _gt427("freeze(teacher)") == []  # the teacher is not what the optimizer trains
    assert _gt427("freeze(model)\n    model.requires_grad_(True)") == []


AFTER_BUILD = '''
import torch
import torch.nn as nn


def finetune(loader):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    {freeze}
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def _gt431(freeze: str) -> list[int]:
    src = textwrap.dedent(AFTER_BUILD).format(freeze=freeze)
    return [f.line for f in check_source(src, "f.py") if f.code == "GT431"]


def test_everything_frozen_after_the_optimizer_was_built():
    # torch 2.13: the first backward raises "element 0 of tensors does not require grad"
    assert _gt431("for p in model.parameters():\n        p.requires_grad = False") == [10]
    assert _gt431("model.requires_grad_(False)") == [9]


def test_a_partial_or_undone_freeze_after_the_optimizer_stays_silent():
    assert _gt431("model[0].requires_grad_(False)") == []
    assert _gt431("model.requires_grad_(False)\n    model[2].requires_grad_(True)") == []
    assert _gt431("if loader is None:\n        model.requires_grad_(False)") == []


def test_a_helper_called_by_two_training_loops_is_reported_once():
    src = textwrap.dedent(LEAK).format(call="freeze(model)", undo="") + textwrap.dedent('''
        def again(model, x):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for epoch in range(3):
                loss = model(x).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                freeze(model)
        ''')
    assert [f.line for f in check_source(src, "e.py") if f.code == "GT427"] == [16]
