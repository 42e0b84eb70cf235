"""Crash: the RNN hidden state is carried into the next batch still attached to its graph."""
import torch
import torch.nn as nn

rnn = nn.GRU(4, 8, batch_first=True)
head = nn.Linear(8, 1)
opt = torch.optim.Adam(list(rnn.parameters()) + list(head.parameters()))
h = torch.zeros(1, 2, 8)
for batch in range(3):
    x, y = torch.randn(2, 5, 4), torch.randn(2, 5, 1)
    opt.zero_grad()
    out, h = rnn(x, h)  # <- cause
    loss = (head(out) - y).pow(2).mean()
    loss.backward()
    opt.step()
