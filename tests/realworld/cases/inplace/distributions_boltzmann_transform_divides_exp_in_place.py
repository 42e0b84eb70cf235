"""torch.distributions' BoltzmannTransform (the transform to the simplex) normalized its exp output in place, probs /= probs.sum(-1, True); exp saves its result for backward, so fitting unconstrained mixture logits through the transform fails at backward.

source: https://github.com/pytorch/pytorch/pull/5842
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import math

import torch


class Transform:
    event_dim = 0

    def __call__(self, x):
        return self._call(x)


class BoltzmannTransform(Transform):
    event_dim = 1

    def __eq__(self, other):
        return isinstance(other, BoltzmannTransform)

    def _call(self, x):
        logprobs = x
        probs = (logprobs - logprobs.max(-1, True)[0]).exp()
        probs /= probs.sum(-1, True)  # ROOT
        return probs

    def _inverse(self, y):
        probs = y
        return probs.log()


torch.manual_seed(0)
data = torch.cat([torch.randn(60) - 2.0, torch.randn(140) + 2.0])
locs = torch.tensor([-1.0, 1.0])
unconstrained_weights = torch.zeros(2, requires_grad=True)
optimizer = torch.optim.Adam([unconstrained_weights], lr=0.05)
transform = BoltzmannTransform()
for step in range(50):
    optimizer.zero_grad()
    weights = transform(unconstrained_weights)
    log_component = -0.5 * (data.unsqueeze(-1) - locs) ** 2 - 0.5 * math.log(2 * math.pi)
    loss = -torch.logsumexp(log_component + weights.log(), dim=-1).mean()
    loss.backward()  # SYMPTOM
    optimizer.step()
print("weights", transform(unconstrained_weights).tolist())
