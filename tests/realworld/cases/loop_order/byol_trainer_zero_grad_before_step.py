"""BYOL trainer zeroes the gradients right between backward and optimizer.step().

source: https://github.com/lucidrains/byol-pytorch/issues/93
kind: bug
symptom: silent
verified: trainer.net.online_encoder.weight never changes
"""
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F


class BYOL(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.online_encoder = nn.Linear(dim, 4)
        self.online_predictor = nn.Linear(4, 4)
        self.target_encoder = copy.deepcopy(self.online_encoder).requires_grad_(False)

    def forward(self, x):
        v1, v2 = x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)
        pred = self.online_predictor(self.online_encoder(v1))
        with torch.no_grad():
            target = self.target_encoder(v2)
        return (2 - 2 * F.cosine_similarity(pred, target, dim=-1)).mean()


class BYOLTrainer:
    def __init__(self, net, lr=3e-4):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters(), lr=lr)

    def forward(self, images, num_train_steps=5):
        for _ in range(num_train_steps):
            loss = self.net(images)
            loss.backward()
            self.optimizer.zero_grad()  # ROOT
            self.optimizer.step()


torch.manual_seed(0)
trainer = BYOLTrainer(BYOL())
trainer.forward(torch.randn(16, 8))
