import torch
import torch.nn as nn

enc = nn.GRU(4, 8, batch_first=True)
head = nn.Linear(8, 1)
opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-3)
for it in range(3):
    seq = torch.randn(2, 6, 4)
    out, _ = enc(seq)
    step_losses = [head(out[:, t]).pow(2).mean() for t in range(out.size(1))]
    total = sum(l.data for l in step_losses)  # ROOT
    opt.zero_grad()
    total.backward()
    opt.step()
