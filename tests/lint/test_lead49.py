"""GT761: a log-sum-exp of log-probabilities written by hand (held-out 43's SCAE mixture):
twin and look-alikes, in-process."""
from __future__ import annotations

import textwrap

from gradtrace.lint import check_source

MIXTURE = '''
import torch
from torch import nn


class Mixture(torch.distributions.Distribution):
    arg_constraints = {{}}

    def __init__(self, logits, means):
        super().__init__(validate_args=False)
        self.logits = logits
        self.parts = torch.distributions.Normal(means, 0.02, validate_args=False)

    def log_prob(self, value):
        lp = self.parts.log_prob(value.unsqueeze(1)).sum(-1) + self.logits
        return {mix}


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.means = nn.Parameter(torch.rand(3, 4))
        self.mix = nn.Linear(2, 3)

    def forward(self, code):
        return Mixture(self.mix(code).log_softmax(-1), self.means.expand(code.shape[0], -1, -1))


model = Decoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for _ in range(3):
    {loop}
'''
TRAIN = "loss = -model(torch.randn(8, 2)).log_prob(torch.rand(8, 4)).mean()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()"
EVAL = "with torch.no_grad():\n        print(model(torch.randn(8, 2)).log_prob(torch.rand(8, 4)).mean())"


def _found(src: str):
    return [(f.code, f.line) for f in check_source(textwrap.dedent(src), "m.py")
            if f.code == "GT761"]


def test_hand_written_log_sum_exp_in_a_trained_distribution_is_found():
    assert _found(MIXTURE.format(mix="lp.exp().sum(dim=1).log()", loop=TRAIN)) == [("GT761", 16)]
    assert _found(MIXTURE.format(mix="torch.log(torch.sum(torch.exp(lp), 1))",
                                 loop=TRAIN)) == [("GT761", 16)]


def test_logsumexp_and_an_untrained_likelihood_stay_silent():
    assert _found(MIXTURE.format(mix="torch.logsumexp(lp, dim=1)", loop=TRAIN)) == []
    assert _found(MIXTURE.format(mix="lp.exp().sum(dim=1).log()", loop=EVAL)) == []


def test_bounded_similarities_stay_silent():
    src = '''
    import torch

    def info_nce(z1, z2, t, opt):
        sim = z1 @ z2.T / t
        loss = (torch.log(torch.exp(sim).sum(1)) - sim.diag()).mean()
        loss.backward()
        opt.step()
    '''
    assert _found(src) == []
