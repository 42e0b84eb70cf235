"""pytorch-meta-optimizer: MetaOptimizer appends its LayerNorm LSTM cells to a plain Python list self.lstms, so they are not registered submodules; meta_optimizer.parameters() handed to Adam leaves them out and the LSTM weights are never trained.

source: https://github.com/ikostrikov/pytorch-meta-optimizer/issues/11
kind: bug
symptom: silent
verified: Adam holds 4 of 16 parameter tensors; after 5 meta steps lstms[0].weight_ih has a gradient (max abs 124) but is unchanged (0.0); with nn.Sequential Adam holds all 16 and it moves 0.0049
"""
import torch
import torch.nn as nn
import torch.optim as optim


class LayerNormLSTMCell(nn.Module):
    def __init__(self, num_inputs, num_hidden):
        super().__init__()
        self.cell = nn.LSTMCell(num_inputs, num_hidden)
        self.ln = nn.LayerNorm(num_hidden)

    def forward(self, x, state):
        h, c = self.cell(x, state)
        return self.ln(h), c

    @property
    def weight_ih(self):
        return self.cell.weight_ih


class MetaOptimizer(nn.Module):
    def __init__(self, num_layers=2, hidden_size=8):
        super(MetaOptimizer, self).__init__()
        self.hidden_size = hidden_size
        self.linear1 = nn.Linear(3, hidden_size)
        self.lstms = []  # ROOT
        for i in range(num_layers):
            self.lstms.append(LayerNormLSTMCell(hidden_size, hidden_size))
        self.linear2 = nn.Linear(hidden_size, 1)

    def forward(self, x):
        x = torch.tanh(self.linear1(x))
        for lstm in self.lstms:
            hx = torch.zeros(x.size(0), self.hidden_size)
            x, _ = lstm(x, (hx, hx))
        return self.linear2(x).squeeze(-1)


torch.manual_seed(0)
meta_optimizer = MetaOptimizer()
optimizer = optim.Adam(meta_optimizer.parameters(), lr=1e-3)
print(len(optimizer.param_groups[0]['params']))
before = meta_optimizer.lstms[0].weight_ih.detach().clone()
w_true = torch.randn(10)
for step in range(5):
    w = torch.randn(10, requires_grad=True)
    X = torch.randn(32, 10)
    loss = ((X @ w - X @ w_true) ** 2).mean()
    grads = torch.autograd.grad(loss, w)[0]
    inputs = torch.stack([grads, grads.abs().log1p(), grads.sign()], dim=1)
    w_new = w.detach() + meta_optimizer(inputs)
    meta_loss = ((X @ w_new - X @ w_true) ** 2).mean()
    optimizer.zero_grad()
    meta_loss.backward()
    optimizer.step()
print(meta_optimizer.lstms[0].weight_ih.grad.abs().max().item(),
      (meta_optimizer.lstms[0].weight_ih - before).abs().max().item())
