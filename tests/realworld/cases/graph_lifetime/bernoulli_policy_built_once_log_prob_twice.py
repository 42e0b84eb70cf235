"""A Bernoulli policy is built once from a requires-grad probability; the second log_prob backward fails.

source: https://github.com/pytorch/pytorch/issues/11192
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
from torch.distributions import Bernoulli

torch.manual_seed(0)
p = torch.tensor(0.2, requires_grad=True)
optimizer = torch.optim.SGD([p], lr=0.01)
pi = Bernoulli(p)  # ROOT
for episode in range(3):
    action = pi.sample()
    reward = 1.0 if action.item() == 1.0 else -1.0
    loss = -reward * pi.log_prob(action)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
