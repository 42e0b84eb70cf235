"""PairedCycleGAN's trainer after its fix: the optimizer helpers iterate `self.optims.values()`, so each inner dict `{"D": ..., "G": ...}` is tested for the "D" or "G" key and the matching optimizers of both the applier and the remover are zeroed and stepped; the four networks train.

source: https://github.com/zeligism/PairedCycleGAN/commit/1ce2da69237206dd5d8876e5d97b917c15b5358f
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

DIM = 16


def init_optim(params, lr=2e-3, betas=(0.5, 0.999)):
    return torch.optim.Adam(params, lr=lr, betas=betas)


class GANPair(nn.Module):
    def __init__(self):
        super().__init__()
        self.G = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, DIM))
        self.D = nn.Sequential(nn.Linear(DIM, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))


class MakeupModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.applier = GANPair()
        self.remover = GANPair()


def get_D_loss(D, real, fake):
    ones, zeros = torch.ones(real.shape[0], 1), torch.zeros(real.shape[0], 1)
    return F.binary_cross_entropy_with_logits(D(real), ones) + F.binary_cross_entropy_with_logits(D(fake), zeros)


def get_G_loss(D, fake):
    return F.binary_cross_entropy_with_logits(D(fake), torch.ones(fake.shape[0], 1))


class CycleGANTrainer:
    def __init__(self, model):
        self.model = model
        self.optims = {
            "applier": {"D": init_optim(model.applier.D.parameters()), "G": init_optim(model.applier.G.parameters())},
            "remover": {"D": init_optim(model.remover.D.parameters()), "G": init_optim(model.remover.G.parameters())},
        }

    def optims_zero_grad(self, D_or_G):
        [optim[D_or_G].zero_grad() for optim in self.optims.values() if D_or_G in optim]

    def optims_step(self, D_or_G):
        [optim[D_or_G].step() for optim in self.optims.values() if D_or_G in optim]

    def D_step(self, real_after, real_before):
        self.optims_zero_grad("D")
        with torch.no_grad():
            fake_after = self.model.applier.G(real_before)
            fake_before = self.model.remover.G(real_after)
        D_loss = get_D_loss(self.model.applier.D, real_after, fake_after) + get_D_loss(self.model.remover.D, real_before, fake_before)
        D_loss.backward()
        self.optims_step("D")
        return D_loss.item()

    def G_step(self, real_after, real_before):
        self.optims_zero_grad("G")
        fake_after = self.model.applier.G(real_before)
        fake_before = self.model.remover.G(real_after)
        G_loss = 0.1 * get_G_loss(self.model.applier.D, fake_after) + 0.1 * get_G_loss(self.model.remover.D, fake_before)
        G_loss = G_loss + F.l1_loss(real_before, self.model.remover.G(fake_after))
        G_loss.backward()
        self.optims_step("G")
        return G_loss.item()

    def train_step(self, real_after, real_before):
        D_loss = self.D_step(real_after, real_before)
        G_loss = self.G_step(real_after, real_before)
        return D_loss, G_loss


model = MakeupModel()
trainer = CycleGANTrainer(model)
before = [p.detach().clone() for p in model.parameters()]
g_losses = []
for step in range(20):
    real_before = torch.randn(32, DIM)
    real_after = real_before + 1.0 + 0.1 * torch.randn(32, DIM)
    _, g = trainer.train_step(real_after, real_before)
    g_losses.append(g)
change = max((p.detach() - b).abs().max().item() for p, b in zip(model.parameters(), before))
print(f"largest weight change after 20 steps: {change:.4g}")
print(f"generator loss: {g_losses[0]:.4f} -> {g_losses[-1]:.4f}")
