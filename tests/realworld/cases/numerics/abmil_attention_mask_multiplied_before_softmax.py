"""Attention-MIL pooling masks padded instances by multiplying the scores by the mask; softmax still gives the zeros weight.

source: https://github.com/georg-wolflein/good-features/pull/1
kind: bug
symptom: silent
verified: with 6 real and 4 padded (zero) instances the padded ones still take 0.44 of the attention weight after 3 steps, diluting the real ones; 0.0 with masked_fill(~mask, -inf)
"""
import torch
import torch.nn as nn


class ABMIL(nn.Module):
    def __init__(self, d_in=16, d_att=8, n_classes=2):
        super().__init__()
        self.attention = nn.Sequential(nn.Linear(d_in, d_att), nn.Tanh(), nn.Linear(d_att, 1))
        self.head = nn.Linear(d_in, n_classes)

    def forward(self, feats, mask):
        a = self.attention(feats).squeeze(-1)  # (batch, n_instances)
        a = a * mask  # ROOT
        a = torch.softmax(a, dim=-1)
        pooled = (a.unsqueeze(-1) * feats).sum(1)
        return self.head(pooled), a


torch.manual_seed(0)
model = ABMIL()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
feats = torch.randn(2, 10, 16)
mask = torch.tensor([[True] * 6 + [False] * 4, [True] * 10])
feats = feats * mask.unsqueeze(-1)  # padded instances are zero vectors
labels = torch.tensor([0, 1])
for it in range(3):
    logits, a = model(feats, mask)
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(a[0, 6:].sum().item())
