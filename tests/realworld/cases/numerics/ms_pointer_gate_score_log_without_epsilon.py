"""Pointer network gate loss takes log(gate_score) and log(1 - gate_score) of a sigmoid that saturates to exactly 1.0.

source: https://github.com/yym6472/ms_pointer_network/issues/1
kind: bug
symptom: silent
verified: the loss is inf from the first batch and the gate weights are NaN after one step; finite with F.logsigmoid
"""
import torch
import torch.nn as nn


class PointerGate(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = nn.Linear(8, hidden)
        self.gate = nn.Linear(hidden, 1)

    def forward(self, source):
        h = torch.tanh(self.encoder(source))
        return torch.sigmoid(self.gate(h)).squeeze(-1)


torch.manual_seed(0)
model = PointerGate()
with torch.no_grad():
    model.gate.weight.mul_(20.0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
source = torch.randn(32, 8) * 3
gate_label = torch.randint(0, 2, (32,)).float()
for step in range(3):
    gate_score = model(source)
    log_gate_score_1 = gate_score.log()  # shape: (batch_size,)
    log_gate_score_2 = (1 - gate_score).log()  # ROOT
    loss = -(gate_label * log_gate_score_1 + (1 - gate_label) * log_gate_score_2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, loss.item(), torch.isnan(model.gate.weight).any().item())
