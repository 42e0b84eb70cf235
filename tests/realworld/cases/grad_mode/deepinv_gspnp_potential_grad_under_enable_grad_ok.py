"""deepinv GSPnP.potential_grad after the fix: the derivative of the potential is taken inside a torch.enable_grad() block, which restores the caller's grad mode on exit, so training after a denoiser call builds its graph as usual.

source: https://github.com/deepinv/deepinv/issues/166
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class StudentGrad(nn.Module):
    def __init__(self, in_channels=3, nc=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(in_channels + 1, nc, 3, padding=1), nn.ELU(), nn.Conv2d(nc, in_channels, 3, padding=1))

    def forward(self, x, sigma):
        noise_level_map = torch.full_like(x[:, :1], sigma)
        return self.net(torch.cat((x, noise_level_map), 1))


class GSPnP(nn.Module):
    def __init__(self, denoiser, alpha=1.0):
        super().__init__()
        self.student_grad = denoiser
        self.alpha = alpha

    def potential_grad(self, x, sigma):
        with torch.enable_grad():
            x = x.float()
            x = x.requires_grad_()
            N = self.student_grad(x, sigma)
            JN = torch.autograd.grad(N, x, grad_outputs=x - N, create_graph=True, only_inputs=True)[0]
            Dg = x - N - JN
        return self.alpha * Dg

    def forward(self, x, sigma):
        Dg = self.potential_grad(x, sigma)
        x_hat = x - Dg
        return x_hat


def GSDRUNet(in_channels=3, out_channels=3):
    return GSPnP(StudentGrad(in_channels))


torch.manual_seed(0)
img = torch.rand((1, 3, 16, 16))
model = GSDRUNet(in_channels=3, out_channels=3)
denoised = model(img, 0.1).detach()

reconstructor = nn.Conv2d(3, 3, 3, padding=1)
optimizer = torch.optim.Adam(reconstructor.parameters(), lr=1e-3)
for step in range(2):
    noisy = denoised + 0.1 * torch.randn_like(denoised)
    loss = F.mse_loss(reconstructor(noisy), denoised)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
