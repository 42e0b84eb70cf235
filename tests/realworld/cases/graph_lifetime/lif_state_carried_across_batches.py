"""Spiking network: the LIF cell's state from the previous batch is passed into the next one.

source: https://github.com/norse/norse/pull/131
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class LIFCell(nn.Module):
    def __init__(self, input_size, hidden_size, tau=0.9, v_th=0.5):
        super().__init__()
        self.input_weights = nn.Parameter(torch.randn(hidden_size, input_size) * 0.5)
        self.tau, self.v_th = tau, v_th

    def forward(self, x, state=None):
        v = torch.zeros(x.shape[0], self.input_weights.shape[0]) if state is None else state
        v = self.tau * v + x @ self.input_weights.t()
        z = torch.sigmoid(10 * (v - self.v_th))
        return z, v * (1 - z)


cell = LIFCell(4, 6)
readout = nn.Linear(6, 2)
optimizer = torch.optim.Adam(list(cell.parameters()) + list(readout.parameters()), lr=1e-2)
state = None
for batch in range(3):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    z, state = cell(x, state)  # ROOT
    loss = nn.functional.cross_entropy(readout(z), y)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
