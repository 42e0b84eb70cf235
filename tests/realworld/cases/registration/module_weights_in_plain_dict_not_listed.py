"""A custom recurrent cell keeps its nn.Parameters in a plain Python dict (self.weights['w_i'] = nn.Parameter(...)); only parameters set directly as attributes are registered, so the optimizer over module.parameters() never updates w_i.

source: https://github.com/pytorch/pytorch/issues/4631
kind: bug
symptom: silent
verified: w_i is missing from module.parameters(); it gets a .grad but is identical after training
"""
import torch
import torch.nn as nn


class Module2(nn.Module):
    def __init__(self, input_size, hidden_size):
        super(Module2, self).__init__()
        self.weights = {}  # ROOT
        self.weights['w_i'] = nn.Parameter(torch.randn(input_size, hidden_size) * 0.1)
        self.out = nn.Linear(hidden_size, 2)

    def forward(self, x):
        return self.out(torch.tanh(x @ self.weights['w_i']))


torch.manual_seed(0)
m2 = Module2(16, 16)
print('m2 parameters:', [tuple(p.shape) for p in m2.parameters()])
optimizer = torch.optim.SGD(m2.parameters(), lr=0.5)
w_before = m2.weights['w_i'].detach().clone()
for step in range(5):
    x, y = torch.randn(8, 16), torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(m2(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(m2.weights['w_i'].grad is not None, torch.equal(m2.weights['w_i'], w_before))
