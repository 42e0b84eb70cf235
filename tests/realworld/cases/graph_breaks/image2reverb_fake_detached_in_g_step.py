"""Image2Reverb generator step: the fake spectrogram is detached before the discriminator scores it.

source: https://github.com/nikhilsinghmus/image2reverb/issues/37
kind: bug
symptom: silent
verified: the generator's gradient is that of 100 * G_loss2 alone; G_loss1 reaches only the discriminator
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(16 + 4, 1)

    def forward(self, spec, f):
        return self.net(torch.cat([spec, f], dim=1))


g = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
d = Discriminator()
opt_g = torch.optim.Adam(g.parameters(), lr=4e-4)
f, spec = torch.randn(2, 4), torch.randn(2, 16)

fake_spec = g(f)
d_fake2 = d(fake_spec.detach(), f)  # ROOT
G_loss1 = F.mse_loss(d_fake2, torch.ones(d_fake2.shape))
G_loss2 = F.l1_loss(fake_spec, spec)
G_loss = G_loss1 + 100 * G_loss2
opt_g.zero_grad()
G_loss.backward()
opt_g.step()
print(G_loss1.requires_grad, d_fake2.grad_fn is not None)
