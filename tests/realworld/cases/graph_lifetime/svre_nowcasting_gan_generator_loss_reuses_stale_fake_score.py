"""A radar nowcasting GAN trainer scores the generator's prediction with the discriminator once per batch and uses that one `fake_score` twice: first for the discriminator loss (`loss_d.backward(retain_graph=True)`, then `optimizer_d.step()`), then for the generator's adversarial loss; the discriminator step has updated, in place, the weights that `fake_score`'s graph saved, so the generator's `loss_g.backward()` fails on the first batch.

source: https://github.com/THUGAF/SVRE-Nowcasting/commit/d76fdfe6d716afd4dd38061312b4c5f3f1f50de9
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

INPUT_STEPS, FORECAST_STEPS, SIZE = 4, 2, 16


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(INPUT_STEPS, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, FORECAST_STEPS, 3, padding=1))

    def forward(self, frames):  # frames: T x B x 1 x H x W
        x = frames.squeeze(2).transpose(0, 1)
        return torch.sigmoid(self.net(x)).transpose(0, 1).unsqueeze(2)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        steps = INPUT_STEPS + FORECAST_STEPS
        self.net = nn.Sequential(nn.Conv2d(steps, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(16, 1, 4, stride=2, padding=1))

    def forward(self, sequence):
        return self.net(sequence.squeeze(2).transpose(0, 1)).mean((1, 2, 3))


class NowcastGAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = Generator()
        self.discriminator = Discriminator()

    def forward(self, frames):
        return self.generator(frames)


def cal_d_loss(fake_score, real_score):
    return F.softplus(fake_score).mean() + F.softplus(-real_score).mean()


def cal_g_loss(fake_score):
    return F.softplus(-fake_score).mean()


class GANTrainer:
    def __init__(self, model):
        self.model = model
        self.optimizer_g = torch.optim.Adam(model.generator.parameters(), lr=1e-4, betas=(0.5, 0.999))
        self.optimizer_d = torch.optim.Adam(model.discriminator.parameters(), lr=1e-4, betas=(0.5, 0.999))

    def train_epoch(self, loader):
        self.model.train()
        for tensor in loader:
            input_, truth = tensor[:INPUT_STEPS], tensor[INPUT_STEPS:]
            pred = self.model(input_)
            real_score = self.model.discriminator(torch.cat([input_, truth]))
            fake_score = self.model.discriminator(torch.cat([input_, pred]))  # ROOT

            loss_d = cal_d_loss(fake_score, real_score)
            self.optimizer_d.zero_grad()
            loss_d.backward(retain_graph=True)
            self.optimizer_d.step()

            loss_g = (pred - truth).abs().mean() + 0.01 * cal_g_loss(fake_score)
            self.optimizer_g.zero_grad()
            loss_g.backward()
            self.optimizer_g.step()
            print(f"loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}")


loader = [torch.rand(INPUT_STEPS + FORECAST_STEPS, 4, 1, SIZE, SIZE) for _ in range(3)]
GANTrainer(NowcastGAN()).train_epoch(loader)
