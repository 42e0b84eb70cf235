"""The lead's session-56 facts, each from a probe of benchmarks/probes/lead56 (real bugs on
torch 2.13), with buggy twins in other styles and silent look-alikes: a submodule handed to
the constructor as a fresh module and cut inside ``forward`` (NOTE [handed a fresh module])."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_paths
from gradtrace.lint.config import Settings

MODELS = '''
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(12, 24)

    def forward(self, x):
        return torch.relu(self.proj(x))


class Head(nn.Module):
    def __init__(self, encoder, n_out=2):
        super().__init__()
        self.encoder = encoder
        self.fc = nn.Linear(24, n_out)

    def forward(self, x):
        feats = {cut}
        return self.fc(feats)
'''

TRAIN = '''
import torch
import torch.nn.functional as F

from models56 import Encoder, Head

{build}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = F.cross_entropy(model(torch.randn(4, 12)), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


@pytest.mark.parametrize("cut, build, want", [
    # buggy: the handed encoder is built right there; the copy/detach cuts its only path
    ("torch.tensor(self.encoder(x))", "model = Head(Encoder())", [21]),
    ("self.encoder(x).detach()", "enc = Encoder()\nmodel = Head(enc, n_out=2)", [21]),
    # silent: a loaded (pretrained) encoder is kept fixed on purpose
    ("self.encoder(x).detach()",
     "enc = Encoder()\nenc.load_state_dict(torch.load('enc.pt'))\nmodel = Head(enc)", []),
    # silent: the encoder is trained by a loss of its own
    ("self.encoder(x).detach()",
     "enc = Encoder()\nmodel = Head(enc)\naux = enc(torch.randn(4, 12)).pow(2).mean()", []),
    # silent: no cut
    ("self.encoder(x)", "model = Head(Encoder())", []),
])
def test_handed_fresh_module_cut_in_forward(tmp_imports, cut, build, want):
    """GT115 for a submodule handed in (`self.encoder = encoder`) when every construction
    site hands it a module made there (torch 2.13: the encoder's `.grad` stays None)."""
    (tmp_imports / "models56.py").write_text(MODELS.lstrip("\n").format(cut=cut))
    (tmp_imports / "train56.py").write_text(TRAIN.lstrip("\n").format(build=build))
    found = [(f.path.rsplit("/", 1)[-1], f.line) for f in
             check_paths([str(tmp_imports)], Settings()).findings if f.code == "GT115"]
    assert found == [("models56.py", n) for n in want]
