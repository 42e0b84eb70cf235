"""RNN regression tutorial: the hidden state is fed to the next step without h_state.data.

source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import math

import torch
import torch.nn as nn

torch.manual_seed(1)
TIME_STEP = 10


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=32, num_layers=1, batch_first=True)
        self.out = nn.Linear(32, 1)

    def forward(self, x, h_state):
        r_out, h_state = self.rnn(x, h_state)
        outs = [self.out(r_out[:, t, :]) for t in range(r_out.size(1))]
        return torch.stack(outs, dim=1), h_state


rnn = RNN()
optimizer = torch.optim.Adam(rnn.parameters(), lr=0.02)
loss_func = nn.MSELoss()
h_state = None
for step in range(3):
    start, end = step * math.pi, (step + 1) * math.pi
    steps = torch.linspace(start, end, TIME_STEP)
    x = torch.sin(steps)[None, :, None]
    y = torch.cos(steps)[None, :, None]
    prediction, h_state = rnn(x, h_state)  # ROOT
    loss = loss_func(prediction, y)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
