"""LipFD's Trainer with the fix from the issue: only the encoder's parameters get requires_grad = False under opt.fix_encoder, the backbone and head keep requires_grad = True and train (AdamW skips the frozen encoder, whose grads stay None).

source: https://github.com/AaronComo/LipFD/issues/18
kind: lookalike
"""
from types import SimpleNamespace

import torch
import torch.nn as nn


class LipFD(nn.Module):
    """Cut-down model: a frozen-able encoder for global features, a region backbone and a head."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(48, 16)
        self.backbone = nn.Linear(12, 16)
        self.fc = nn.Linear(32, 1)

    def get_features(self, x):
        return self.encoder(x.flatten(1))

    def forward(self, crops, features):
        region = torch.stack([self.backbone(c.flatten(1)) for c in crops], 1)
        weights_org = region.mean(-1).softmax(-1)
        weights_max = weights_org.max(-1).values
        fused = (region * weights_org.unsqueeze(-1)).sum(1)
        return self.fc(torch.cat([fused, features], -1)), weights_max, weights_org


class RALoss(nn.Module):
    def forward(self, weights_max, weights_org):
        return (1.0 / (weights_max + 1e-6) - weights_org.size(1)).clamp(min=0).mean() * 0.01


class Trainer(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.opt = opt
        self.model = LipFD()
        if opt.fix_encoder:
            params = []
            for name, p in self.model.named_parameters():
                if name.split(".")[0] in ["encoder"]:
                    p.requires_grad = False
                else:
                    p.requires_grad = True
            params = self.model.parameters()
        self.optimizer = torch.optim.AdamW(params, lr=opt.lr, betas=(opt.beta1, 0.999), weight_decay=opt.weight_decay)
        self.criterion = RALoss()
        self.criterion1 = nn.CrossEntropyLoss()

    def set_input(self, input):
        self.input, self.crops, self.label = input[0], input[1], input[2].float()

    def forward(self):
        self.features = self.model.get_features(self.input)
        self.output, self.weights_max, self.weights_org = self.model.forward(self.crops, self.features)
        self.output = self.output.view(-1)
        self.loss = self.criterion(self.weights_max, self.weights_org) + self.criterion1(self.output, self.label)

    def optimize_parameters(self):
        self.optimizer.zero_grad()
        self.loss.backward()
        self.optimizer.step()


torch.manual_seed(0)
opt = SimpleNamespace(fix_encoder=True, lr=2e-4, beta1=0.9, weight_decay=0.0)
trainer = Trainer(opt)
batch = (torch.randn(4, 3, 4, 4), [torch.randn(4, 3, 2, 2) for _ in range(3)], torch.randint(0, 2, (4,)))
trainer.set_input(batch)
trainer.forward()
trainer.optimize_parameters()
print(trainer.loss.item())
