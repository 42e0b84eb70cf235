"""so-vits-svc-fork's VitsLightning.training_step runs the discriminator on the generated audio inside `with torch.no_grad():` when it computes the generator loss: the adversarial and feature-matching terms of `loss_gen_all` are constants, so the generator is trained by the mel and KL terms only and never learns from the discriminator.

source: https://github.com/34j/so-vits-svc-fork/pull/274
kind: bug
symptom: silent
verified: the generator gradient of loss_gen_all equals the gradient of its mel term alone (the adversarial terms add nothing)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = nn.Conv1d(4, 16, 3, padding=1)
        self.up = nn.ConvTranspose1d(16, 8, 4, stride=4)
        self.post = nn.Conv1d(8, 1, 3, padding=1)

    def forward(self, c):
        return torch.tanh(self.post(F.leaky_relu(self.up(F.leaky_relu(self.pre(c), 0.1)), 0.1)))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(1, 8, 5, stride=2, padding=2), nn.Conv1d(8, 8, 5, stride=2, padding=2)])
        self.conv_post = nn.Conv1d(8, 1, 3, padding=1)

    def forward_one(self, x):
        fmap = []
        for conv in self.convs:
            x = F.leaky_relu(conv(x), 0.1)
            fmap.append(x)
        return self.conv_post(x).flatten(1), fmap

    def forward(self, y, y_hat):
        y_d_r, fmap_r = self.forward_one(y)
        y_d_g, fmap_g = self.forward_one(y_hat)
        return [y_d_r], [y_d_g], [fmap_r], [fmap_g]


def mel(y):
    return F.avg_pool1d(y.abs(), 8)


def feature_loss(fmap_r, fmap_g):
    loss = 0
    for dr, dg in zip(fmap_r, fmap_g):
        for rl, gl in zip(dr, dg):
            loss += torch.mean(torch.abs(rl.float().detach() - gl.float()))
    return loss * 2


def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    loss = 0
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
        loss += torch.mean((1 - dr.float()) ** 2) + torch.mean(dg.float() ** 2)
    return loss


def generator_loss(disc_outputs):
    loss = 0
    for dg in disc_outputs:
        loss += torch.mean((1 - dg.float()) ** 2)
    return loss


class VitsLightning(nn.Module):
    """The manual-optimization training step of the Lightning module, without Lightning."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net_g = Generator()
        self.net_d = Discriminator()
        self.optim_g = torch.optim.AdamW(self.net_g.parameters(), 2e-4, betas=(0.8, 0.99))
        self.optim_d = torch.optim.AdamW(self.net_d.parameters(), 2e-4, betas=(0.8, 0.99))
        self._toggled = {}

    def optimizers(self):
        return self.optim_g, self.optim_d

    def toggle_optimizer(self, optimizer):
        """Like LightningModule.toggle_optimizer: only this optimizer's parameters require grad."""
        own = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for opt in self.optimizers():
            for group in opt.param_groups:
                for p in group["params"]:
                    self._toggled.setdefault(id(p), (p, p.requires_grad))
                    p.requires_grad = id(p) in own

    def untoggle_optimizer(self, optimizer):
        for p, flag in self._toggled.values():
            p.requires_grad = flag
        self._toggled = {}

    def manual_backward(self, loss):
        loss.backward()

    def generator_losses(self, c, y):
        y_hat = self.net_g(c)
        loss_mel = F.l1_loss(mel(y), mel(y_hat)) * 45
        with torch.no_grad():  # ROOT
            y_d_hat_r, y_d_hat_g, fmap_r, fmap_g = self.net_d(y, y_hat)
        loss_fm = feature_loss(fmap_r, fmap_g)
        loss_gen = generator_loss(y_d_hat_g)
        return y_hat, loss_mel, loss_gen + loss_fm + loss_mel

    def training_step(self, batch):
        c, y = batch
        optim_g, optim_d = self.optimizers()

        # Generator
        self.toggle_optimizer(optim_g)
        y_hat, loss_mel, loss_gen_all = self.generator_losses(c, y)
        self.manual_backward(loss_gen_all)
        optim_g.step()
        optim_g.zero_grad()
        self.untoggle_optimizer(optim_g)

        # Discriminator
        self.toggle_optimizer(optim_d)
        y_d_hat_r, y_d_hat_g, _, _ = self.net_d(y, y_hat.detach())
        loss_disc_all = discriminator_loss(y_d_hat_r, y_d_hat_g)
        self.manual_backward(loss_disc_all)
        optim_d.step()
        optim_d.zero_grad()
        self.untoggle_optimizer(optim_d)
        return loss_gen_all.item(), loss_disc_all.item()


model = VitsLightning()
g = torch.Generator().manual_seed(1)
batches = [(torch.randn(2, 4, 16, generator=g), torch.tanh(torch.randn(2, 1, 64, generator=g))) for _ in range(3)]
for step, batch in enumerate(batches):
    loss_g, loss_d = model.training_step(batch)
    print(f"step {step}: loss_g {loss_g:.4f} loss_d {loss_d:.4f}")

# how much do the discriminator terms move the generator?
c, y = batches[0]
model.toggle_optimizer(model.optim_g)
_, loss_mel, loss_gen_all = model.generator_losses(c, y)
full = torch.autograd.grad(loss_gen_all, list(model.net_g.parameters()), retain_graph=True)
mel_only = torch.autograd.grad(loss_mel, list(model.net_g.parameters()))
model.untoggle_optimizer(model.optim_g)
adversarial = max((a - b).abs().max().item() for a, b in zip(full, mel_only))
print(f"largest generator-gradient contribution of the adversarial terms: {adversarial:.2e}")
