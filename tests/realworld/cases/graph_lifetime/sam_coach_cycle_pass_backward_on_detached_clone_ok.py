"""SAM coach: loss.backward() on the aging pass, then the cycle pass starts from y_hat.clone().detach().requires_grad_(True) and builds its own graph for a second loss.backward(); neither backward needs the other's graph, so no retain_graph is required, as the author explains.

source: https://github.com/yuval-alaluf/SAM/issues/42
kind: lookalike
verified: two training steps run, each with two backward calls and one optimizer step
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class pSp(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        self.decoder = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, x):
        latent = self.encoder(x)
        return torch.tanh(self.decoder(latent)), latent


class Coach:
    def __init__(self):
        self.net = pSp()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=1e-4)

    def perform_forward_pass(self, x):
        return self.net(x)

    def calc_loss(self, y, y_hat, latent):
        return F.mse_loss(y_hat, y) + 0.01 * latent.pow(2).mean()

    def train_step(self, x, y, target_ages, input_ages):
        self.optimizer.zero_grad()
        x_input = torch.cat([x, target_ages.expand(-1, 1, *x.shape[2:])], dim=1)
        y_hat, latent = self.perform_forward_pass(x_input)
        loss = self.calc_loss(y, y_hat, latent)
        loss.backward()

        y_hat_clone = y_hat.clone().detach().requires_grad_(True)
        y_hat_inverse = torch.cat([y_hat_clone, input_ages.expand(-1, 1, *x.shape[2:])], dim=1)
        y_recovered, latent_cycle = self.perform_forward_pass(y_hat_inverse)
        loss = self.calc_loss(x, y_recovered, latent_cycle)
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
coach = Coach()
for step in range(2):
    x, y = torch.randn(2, 3, 16, 16), torch.randn(2, 3, 16, 16)
    print(coach.train_step(x, y, torch.rand(2, 1, 1, 1), torch.rand(2, 1, 1, 1)))
