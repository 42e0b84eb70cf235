"""params_disc concatenates the MRD discriminator's parameters twice; the MPD discriminator is never optimized.

source: https://github.com/line/open-universe/issues/5
kind: bug
symptom: silent
verified: model.loss_mpd.conv.weight never changes
"""
import torch
import torch.nn as nn


class MultiPeriodDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class MultiResolutionDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 5, padding=2)

    def forward(self, x):
        return self.conv(x)


class UniverseGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss_mpd = MultiPeriodDiscriminator()
        self.loss_mrd = MultiResolutionDiscriminator()

    def configure_optimizers(self):
        params_disc = list(self.loss_mrd.parameters()) + list(
            self.loss_mrd.parameters()  # ROOT
        )
        return torch.optim.AdamW(params_disc, lr=1e-3)

    def disc_loss(self, real, fake):
        loss = 0
        for d in (self.loss_mpd, self.loss_mrd):
            loss = loss + torch.mean((1 - d(real)) ** 2) + torch.mean(d(fake) ** 2)
        return loss


torch.manual_seed(0)
model = UniverseGAN()
opt_disc = model.configure_optimizers()
real, fake = torch.randn(4, 1, 32), torch.randn(4, 1, 32)
for _ in range(5):
    opt_disc.zero_grad()
    loss = model.disc_loss(real, fake)
    loss.backward()
    opt_disc.step()
