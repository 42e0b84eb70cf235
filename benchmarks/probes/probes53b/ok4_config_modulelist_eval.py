from types import SimpleNamespace

import torch
import torch.nn as nn

cfg = SimpleNamespace(act="GELU", widths=[8, 16, 2], lr=1e-3)


class ConfigNet(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.stages = nn.ModuleDict()
        for i, (a, b) in enumerate(zip(cfg.widths[:-1], cfg.widths[1:])):
            self.stages[f"stage{i}"] = nn.Sequential(nn.Linear(a, b), getattr(nn, cfg.act)())

    def forward(self, x):
        for name in sorted(self.stages):
            x = self.stages[name](x)
        return x


net = ConfigNet(cfg)
opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
for _ in range(2):
    loss = net(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    net.eval()
    with torch.inference_mode():
        val = net(torch.randn(4, 8)).sum().item()
    net.train()
print("ok", val)
