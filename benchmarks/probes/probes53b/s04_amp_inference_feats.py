import torch
import torch.nn as nn
import torch.nn.functional as F

backbone = nn.Sequential(nn.Linear(12, 24), nn.ReLU())
head = nn.Linear(24, 3)
opt = torch.optim.SGD(head.parameters(), lr=0.1)

for step in range(2):
    x, y = torch.randn(6, 12), torch.randint(0, 3, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.inference_mode():  # ROOT
            feats = backbone(x)
        logits = head(feats)
        loss = F.cross_entropy(logits.float(), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
