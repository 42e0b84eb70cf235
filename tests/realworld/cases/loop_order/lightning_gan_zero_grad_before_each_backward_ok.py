"""The GAN loop with each optimizer's zero_grad() before its own backward (what Lightning moved to, with toggle_optimizer later): the leftover gradient the other model's loss left on the discriminator or generator is cleared before that model's step.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/591
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GAN(nn.Module):
    def __init__(self, latent_dim=8, img_dim=16):
        super().__init__()
        self.latent_dim = latent_dim
        self.generator = nn.Sequential(nn.Linear(latent_dim, 32), nn.ReLU(), nn.Linear(32, img_dim), nn.Tanh())
        self.discriminator = nn.Sequential(nn.Linear(img_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def training_step(self, batch, batch_idx, optimizer_idx):
        z = torch.randn(batch.shape[0], self.latent_dim)
        if optimizer_idx == 0:
            fake = self.generator(z)
            return F.binary_cross_entropy_with_logits(self.discriminator(fake), torch.ones(batch.shape[0], 1))
        real = F.binary_cross_entropy_with_logits(self.discriminator(batch), torch.ones(batch.shape[0], 1))
        fake = F.binary_cross_entropy_with_logits(self.discriminator(self.generator(z).detach()),
                                                  torch.zeros(batch.shape[0], 1))
        return (real + fake) / 2

    def configure_optimizers(self):
        return [torch.optim.Adam(self.generator.parameters(), lr=2e-4),
                torch.optim.Adam(self.discriminator.parameters(), lr=2e-4)]


def run_training_batch(model, optimizers, batch, batch_idx, log):
    for optimizer_idx, optimizer in enumerate(optimizers):
        optimizer.zero_grad()
        loss = model.training_step(batch, batch_idx, optimizer_idx)
        loss.backward()
        if optimizer_idx == 1 and batch_idx == 1:
            log.append(model.discriminator[2].weight.grad.norm().item())
        optimizer.step()


torch.manual_seed(0)
model = GAN()
optimizers = model.configure_optimizers()
data = torch.randn(40, 16, 16).tanh()
log = []
for batch_idx, batch in enumerate(data):
    run_training_batch(model, optimizers, batch, batch_idx, log)
print("second D step grad", log[0])
print("D weights", torch.cat([p.detach().flatten() for p in model.discriminator.parameters()]).norm().item())
