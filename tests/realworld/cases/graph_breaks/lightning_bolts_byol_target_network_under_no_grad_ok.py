"""lightning-bolts BYOL shared_step computes the target projections under torch.no_grad(), so the loss needs no extra .detach() on z2: the target network gets no gradient and only the online network is trained (the question in the thread).

source: https://github.com/Lightning-Universe/lightning-bolts/issues/801
kind: lookalike
verified: after backward the target network has no gradients and the online network has
"""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F


class SiameseArm(nn.Module):
    def __init__(self, input_dim=32, hidden_size=64, output_dim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, hidden_size), nn.ReLU())
        self.projector = nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, output_dim))
        self.predictor = nn.Sequential(nn.Linear(output_dim, hidden_size), nn.ReLU(), nn.Linear(hidden_size, output_dim))

    def forward(self, x):
        y = self.encoder(x)
        z = self.projector(y)
        h = self.predictor(z)
        return y, z, h


class BYOL(nn.Module):
    def __init__(self):
        super().__init__()
        self.online_network = SiameseArm()
        self.target_network = copy.deepcopy(self.online_network)

    def shared_step(self, batch, batch_idx):
        imgs, y = batch
        img_1, img_2 = imgs[:2]

        y1, z1, h1 = self.online_network(img_1)
        with torch.no_grad():
            y2, z2, h2 = self.target_network(img_2)
        loss_a = -2 * F.cosine_similarity(h1, z2).mean()

        y1, z1, h1 = self.online_network(img_2)
        with torch.no_grad():
            y2, z2, h2 = self.target_network(img_1)
        loss_b = -2 * F.cosine_similarity(h1, z2).mean()

        total_loss = loss_a + loss_b
        return loss_a, loss_b, total_loss


torch.manual_seed(0)
model = BYOL()
optimizer = torch.optim.Adam(model.online_network.parameters(), lr=1e-3)
x = torch.randn(8, 32)
batch = ((x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)), torch.zeros(8))
_, _, total_loss = model.shared_step(batch, 0)
optimizer.zero_grad()
total_loss.backward()
optimizer.step()
assert all(p.grad is None for p in model.target_network.parameters())
assert all(p.grad is not None for p in model.online_network.parameters())
