"""A CLIP-style dual encoder whose learnable temperature is kept as a buffer."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class DualEncoder(nn.Module):
    def __init__(self, d_img=12, d_txt=10, d=8):
        super().__init__()
        self.img = nn.Linear(d_img, d)
        self.txt = nn.Linear(d_txt, d)
        self.register_buffer("logit_scale", torch.ones([]) * math.log(1 / 0.07))  # ROOT

    def forward(self, im, tx):
        a = F.normalize(self.img(im), dim=-1)
        b = F.normalize(self.txt(tx), dim=-1)
        return self.logit_scale.exp() * a @ b.t()


model = DualEncoder()
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
for step in range(5):
    logits = model(torch.randn(6, 12), torch.randn(6, 10))
    labels = torch.arange(6)
    loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
    opt.zero_grad()
    loss.backward()
    opt.step()
print("temperature", model.logit_scale.exp().item())
