"""freeze() puts the encoder's BatchNorm in eval mode once; the next model.train() switches it back.

source: https://github.com/pgniewko/gt-pyg/issues/112
kind: bug
symptom: silent
verified: the frozen encoder's BatchNorm running_mean changes during fine-tuning
"""
import torch
import torch.nn as nn


class GraphTransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        return self.head(self.encoder(x))

    def _set_requires_grad(self, modules, requires_grad):
        for module in modules:
            for param in module.parameters():
                param.requires_grad = requires_grad
            for m in module.modules():
                if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                    if requires_grad:
                        m.train()
                    else:
                        m.eval()

    def freeze(self):
        self._set_requires_grad([self.encoder], False)


torch.manual_seed(0)
model = GraphTransformerNet()
model.freeze()
bn = model.encoder[1]
before = bn.running_mean.clone()
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for epoch in range(2):
    model.train()  # ROOT
    for _ in range(3):
        x, y = torch.randn(16, 8) + 2, torch.randn(16, 1)
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
print(torch.equal(before, bn.running_mean))
