"""RAE train.py after the proposed fix: gradients are cleared once per optimizer step and accumulated over micro-batches.

source: https://github.com/bytetriper/RAE/issues/67
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyDiT(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, 32), nn.SiLU(), nn.Linear(32, dim))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None]], dim=1))


torch.manual_seed(0)
model = TinyDiT()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
grad_accum_steps = 4
micro_batch_size = 2
loader = [torch.randn(grad_accum_steps * micro_batch_size, 8) for _ in range(3)]
for step, latents in enumerate(loader):
    optimizer.zero_grad(set_to_none=True)
    for micro in range(grad_accum_steps):
        x1 = latents[micro * micro_batch_size:(micro + 1) * micro_batch_size]
        x0 = torch.randn_like(x1)
        t = torch.rand(x1.size(0))
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        loss = F.mse_loss(model(xt, t), x1 - x0) / grad_accum_steps
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
