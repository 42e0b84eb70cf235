"""phenaki-pytorch after "fix a discriminator gradient issue": the trainer calls `discr_optim.zero_grad()` before the discriminator's accumulation loop, which clears the gradient the VAE's adversarial term left in the discriminator, so each discriminator step applies the discriminator loss's gradient alone.

source: https://github.com/lucidrains/phenaki-pytorch/commit/3c33570ce43f652a7d43fa3e6023f51bc5e69184
kind: lookalike
"""
import torch
from torch import nn
import torch.nn.functional as F
from torch.autograd import grad as torch_grad

torch.manual_seed(0)


def hinge_discr_loss(fake, real):
    return (F.relu(1 + fake) + F.relu(1 - real)).mean()


def hinge_gen_loss(fake):
    return -fake.mean()


def gradient_penalty(images, output, weight=10):
    gradients = torch_grad(outputs=output, inputs=images, grad_outputs=torch.ones_like(output),
                           create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.reshape(images.shape[0], -1)
    return weight * ((gradients.norm(2, dim=1) - 1) ** 2).mean()


class Discriminator(nn.Module):
    def __init__(self, channels=3, dim=8):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(channels, dim, 4, 2, 1), nn.LeakyReLU(0.1), nn.Conv2d(dim, dim, 4, 2, 1),
                                 nn.LeakyReLU(0.1), nn.Flatten(), nn.Linear(dim * 4 * 4, 1))

    def forward(self, x):
        return self.net(x)


class CViViT(nn.Module):
    """Reduced to frames: a convolutional encoder/decoder instead of the spatio-temporal transformer and VQ."""

    def __init__(self, dim=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, dim, 4, 2, 1), nn.GELU(), nn.Conv2d(dim, dim, 3, 1, 1))
        self.decoder = nn.Sequential(nn.ConvTranspose2d(dim, dim, 4, 2, 1), nn.GELU(), nn.Conv2d(dim, 3, 3, 1, 1))
        self.discr = Discriminator()
        self.discr_loss = hinge_discr_loss
        self.gen_loss = hinge_gen_loss

    def forward(self, video, return_discr_loss=False, apply_grad_penalty=True):
        recon_video = self.decoder(self.encoder(video))
        recon_loss = F.mse_loss(video, recon_video)
        if return_discr_loss:
            recon_video = recon_video.detach()
            video.requires_grad_()
            recon_video_discr_logits, video_discr_logits = map(self.discr, (recon_video, video))
            discr_loss = self.discr_loss(recon_video_discr_logits, video_discr_logits)
            if apply_grad_penalty:
                gp = gradient_penalty(video, video_discr_logits)
                loss = discr_loss + gp
            return loss
        # generator adversarial loss (the adaptive weight from the last decoder layer's gradient is fixed to 0.5)
        gen_loss = self.gen_loss(self.discr(recon_video))
        return recon_loss + 0.5 * gen_loss


class CViViTTrainer:
    def __init__(self, vae, dl_iter, lr=3e-4, grad_accum_every=2):
        self.vae = vae
        self.dl_iter = dl_iter
        self.grad_accum_every = grad_accum_every
        all_parameters = set(vae.parameters())
        discr_parameters = set(vae.discr.parameters())
        vae_parameters = all_parameters - discr_parameters
        self.optim = torch.optim.AdamW(list(vae_parameters), lr=lr)
        self.discr_optim = torch.optim.AdamW(list(discr_parameters), lr=lr)

    def train_step(self, measure):
        self.vae.train()
        # update vae (generator)
        for _ in range(self.grad_accum_every):
            img = next(self.dl_iter)
            loss = self.vae(img, apply_grad_penalty=True)
            (loss / self.grad_accum_every).backward()
        self.optim.step()
        self.optim.zero_grad()

        # update discriminator
        self.discr_optim.zero_grad()

        discr_imgs = []
        for _ in range(self.grad_accum_every):
            img = next(self.dl_iter)
            discr_imgs.append(img)
            loss = self.vae(img, return_discr_loss=True)
            (loss / self.grad_accum_every).backward()
        measure(discr_imgs)
        self.discr_optim.step()


def measure(discr_imgs):
    """Gradient of the discriminator loss alone for the same frames (the decoder's output is deterministic)."""
    params = list(vae.discr.parameters())
    ref = [torch.zeros_like(p) for p in params]
    for img in discr_imgs:
        loss = vae(img.detach().clone(), return_discr_loss=True) / trainer.grad_accum_every
        for r, g in zip(ref, torch.autograd.grad(loss, params)):
            r += g
    num = sum(((p.grad - r) ** 2).sum() for p, r in zip(params, ref)).sqrt()
    den = sum((r ** 2).sum() for r in ref).sqrt()
    errors.append((num / den).item())


frames = iter(torch.rand(8, 3, 16, 16) for _ in range(40))
vae = CViViT()
trainer = CViViTTrainer(vae, frames)
errors = []
for step in range(5):
    trainer.train_step(measure)
print("discriminator gradient relative error per step:", " ".join(f"{e:.3f}" for e in errors))
