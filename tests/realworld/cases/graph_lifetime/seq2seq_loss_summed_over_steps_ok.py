"""Decoder loss summed over time steps with loss += before one backward (needed for BPTT).

source: https://github.com/spro/practical-pytorch/pull/29
kind: lookalike
verified: encoder and decoder weights get gradients and change
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
encoder = nn.GRU(4, 8)
decoder = nn.GRUCell(4, 8)
out = nn.Linear(8, 4)
params = list(encoder.parameters()) + list(decoder.parameters()) + list(out.parameters())
optimizer = torch.optim.SGD(params, lr=0.1)
criterion = nn.MSELoss()

src, tgt = torch.randn(5, 1, 4), torch.randn(6, 1, 4)
optimizer.zero_grad()
_, hidden = encoder(src)
hidden = hidden[0]
loss = 0
decoder_input = torch.zeros(1, 4)
for di in range(tgt.size(0)):
    hidden = decoder(decoder_input, hidden)
    prediction = out(hidden)
    loss += criterion(prediction, tgt[di])
    decoder_input = tgt[di]
loss.backward()
optimizer.step()
print(all(p.grad is not None for p in params))
