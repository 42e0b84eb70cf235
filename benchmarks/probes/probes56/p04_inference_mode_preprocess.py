"""Features made by a decorated preprocessing helper feed a trainable adapter."""
import torch
import torch.nn as nn
import torch.nn.functional as F

backbone = nn.Sequential(nn.Linear(16, 32), nn.GELU()).eval()
for p in backbone.parameters():
    p.requires_grad_(False)


@torch.inference_mode()  # ROOT
def preprocess(raw):
    raw = (raw - raw.mean(0)) / (raw.std(0) + 1e-6)
    return backbone(raw)


adapter = nn.Linear(32, 5)
opt = torch.optim.SGD(adapter.parameters(), lr=0.1)
for epoch in range(2):
    raw, y = torch.randn(8, 16), torch.randint(0, 5, (8,))
    feats = preprocess(raw)
    loss = F.cross_entropy(adapter(feats), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok", loss.item())
