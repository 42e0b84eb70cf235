import torch
import torch.nn as nn
import torch.nn.functional as F

rnn, proj = nn.LSTM(4, 8, batch_first=True), nn.Linear(8, 4)
opt = torch.optim.Adam(list(rnn.parameters()) + list(proj.parameters()), 1e-3)
state = None
for step in range(3):
    x, y = torch.randn(2, 5, 4), torch.randn(2, 5, 4)
    out, state = rnn(x, state)
    state = tuple(s.detach() for s in state)
    loss = F.mse_loss(proj(out), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
