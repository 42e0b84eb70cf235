"""Multi-task losses kept in a dict and weighted from a config."""
import torch
import torch.nn as nn
import torch.nn.functional as F

cfg = {"loss_weights": {"seg": 1.0, "depth": 0.5, "normal": 0.1}}


class MultiHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.heads = nn.ModuleDict({"seg": nn.Conv2d(8, 4, 1), "depth": nn.Conv2d(8, 1, 1),
                                    "normal": nn.Conv2d(8, 3, 1)})

    def forward(self, x):
        h = self.trunk(x)
        return {k: head(h) for k, head in self.heads.items()}


def task_losses(out, tgt):
    return {"seg": F.cross_entropy(out["seg"], tgt["seg"]),
            "depth": F.l1_loss(out["depth"], tgt["depth"]),
            "normal": 1 - F.cosine_similarity(out["normal"], tgt["normal"], dim=1).mean()}


net = MultiHead()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for it in range(3):
    x = torch.randn(2, 3, 8, 8)
    tgt = {"seg": torch.randint(0, 4, (2, 8, 8)), "depth": torch.rand(2, 1, 8, 8), "normal": torch.randn(2, 3, 8, 8)}
    losses = task_losses(net(x), tgt)
    total = sum(cfg["loss_weights"][k] * float(v) for k, v in losses.items())  # ROOT
    total = torch.tensor(total, requires_grad=True)
    opt.zero_grad()
    total.backward()
    opt.step()
    print(it, {k: round(v.item(), 3) for k, v in losses.items()})
