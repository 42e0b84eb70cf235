"""Balance loss collected with torch.tensor(loss_list): the gate never gets a gradient from it.

source: https://github.com/laekov/fastmoe/issues/49
kind: bug
symptom: silent
verified: moe.gate.gate.weight.grad is None after loss.backward()
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class NaiveGate(nn.Module):
    def __init__(self, d_model, num_expert):
        super().__init__()
        self.gate = nn.Linear(d_model, num_expert)
        self.num_expert = num_expert
        self.loss = None

    def forward(self, inp):
        score = F.softmax(self.gate(inp), dim=-1)
        self.loss = (score.mean(0) ** 2).sum() * self.num_expert
        return torch.topk(score, k=1, dim=-1)[1]


class MoE(nn.Module):
    def __init__(self, d_model=8, num_expert=4):
        super().__init__()
        self.gate = NaiveGate(d_model, num_expert)
        self.experts = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(num_expert))

    def forward(self, x):
        idx = self.gate(x)
        return torch.stack([self.experts[int(i)](row) for i, row in zip(idx[:, 0], x)])


def get_balance_loss(layers):
    loss_list = [layer.gate.loss for layer in layers]
    return torch.tensor(loss_list).mean()  # ROOT


torch.manual_seed(0)
layers = nn.ModuleList([MoE(), MoE()])
opt = torch.optim.SGD(layers.parameters(), lr=0.1)
x, y = torch.randn(16, 8), torch.randn(16, 8)
for step in range(3):
    opt.zero_grad()
    h = x
    for moe in layers:
        h = moe(h)
    loss = F.mse_loss(h, y) + 0.1 * get_balance_loss(layers)
    loss.backward()
    opt.step()
print(layers[0].gate.gate.weight.grad)
