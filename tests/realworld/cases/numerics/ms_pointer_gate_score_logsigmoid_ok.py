"""Pointer network gate loss computed with F.logsigmoid on the gate logit, finite when the sigmoid saturates.

source: https://github.com/yym6472/ms_pointer_network/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PointerGate(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.encoder = nn.Linear(8, hidden)
        self.gate = nn.Linear(hidden, 1)

    def forward(self, source):
        h = torch.tanh(self.encoder(source))
        return self.gate(h).squeeze(-1)


torch.manual_seed(0)
model = PointerGate()
with torch.no_grad():
    model.gate.weight.mul_(20.0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
source = torch.randn(32, 8) * 3
gate_label = torch.randint(0, 2, (32,)).float()
for step in range(3):
    gate_logit = model(source)
    log_gate_score_1 = F.logsigmoid(gate_logit)
    log_gate_score_2 = F.logsigmoid(-gate_logit)
    loss = -(gate_label * log_gate_score_1 + (1 - gate_label) * log_gate_score_2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(step, loss.item(), torch.isnan(model.gate.weight).any().item())
