"""julschoen/3D-GAN's `StyleGAN2Loss.step_D` computes the R1 penalty's input gradient with `torch.autograd.grad(outputs=[real_logits.sum()], inputs=[real_img_tmp], create_graph=False)`: without `create_graph` (or `retain_graph`) the call frees the graph of the discriminator's real pass, and the combined `(real_logits * 0 + loss_Dreal + loss_Dr1).mean().backward()` that follows must walk that same graph, so the first discriminator step with R1 fails. The fix commit passes `create_graph=True`, which also lets the penalty train the discriminator.

source: https://github.com/julschoen/3D-GAN/commit/f2fb9e09161b2072f5bbce42c88db07f1beea0b5
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

Z, SIDE = 16, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(Z, 8 * 2 * 2 * 2)
        self.up = nn.Sequential(nn.ConvTranspose3d(8, 4, 4, 2, 1), nn.LeakyReLU(0.2),
                                nn.ConvTranspose3d(4, 1, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.up(self.fc(z).view(-1, 8, 2, 2, 2))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv3d(1, 4, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv3d(4, 8, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Flatten(), nn.Linear(8 * 2 * 2 * 2, 1))

    def forward(self, x):
        return self.net(x)


class StyleGAN2Loss:
    def __init__(self, G, D, r1_gamma=10.0):
        self.G, self.D, self.r1_gamma = G, D, r1_gamma

    def step_D(self, step, real_img, gen_z, gain=1):
        do_Dr1 = (step % 4) == 0 and self.r1_gamma != 0
        gen_logits = self.D(self.G(gen_z))
        loss_Dgen = nn.functional.softplus(gen_logits)
        loss_Dgen.mean().mul(gain).backward()

        real_img_tmp = real_img.detach().requires_grad_(do_Dr1)
        real_logits = self.D(real_img_tmp)
        loss_Dreal = nn.functional.softplus(-real_logits)
        loss_Dr1 = 0
        if do_Dr1:
            r1_grads = torch.autograd.grad(outputs=[real_logits.sum()], inputs=[real_img_tmp],  # ROOT
                                           create_graph=False, only_inputs=True)[0]
            r1_penalty = r1_grads.square().sum([1, 2, 3, 4])
            loss_Dr1 = r1_penalty * (self.r1_gamma / 2)
        (real_logits * 0 + loss_Dreal + loss_Dr1).mean().mul(gain).backward()
        return loss_Dreal.mean().item(), loss_Dgen.mean().item()


class Trainer:
    def __init__(self):
        self.netG, self.netD = Generator(), Discriminator()
        self.optimizerG = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.0, 0.99))
        self.optimizerD = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.0, 0.99))
        self.loss = StyleGAN2Loss(self.netG, self.netD)

    def D_step(self, step, real):
        for p in self.netD.parameters():
            p.requires_grad = True
        self.netD.zero_grad()
        noise = torch.randn(real.shape[0], Z)
        err_real, err_fake = self.loss.step_D(step, real, noise)
        self.optimizerD.step()
        for p in self.netD.parameters():
            p.requires_grad = False
        return err_real, err_fake

    def G_step(self):
        for p in self.netG.parameters():
            p.requires_grad = True
        self.netG.zero_grad()
        loss = nn.functional.softplus(-self.netD(self.netG(torch.randn(4, Z)))).mean()
        loss.backward()
        self.optimizerG.step()
        for p in self.netG.parameters():
            p.requires_grad = False
        return loss.item()

    def train(self, niters=3):
        for p in list(self.netD.parameters()) + list(self.netG.parameters()):
            p.requires_grad = False
        for i in range(niters):
            real = torch.rand(4, 1, SIDE, SIDE, SIDE) * 2 - 1
            err_real, err_fake = self.D_step(i, real)
            err_g = self.G_step()
            print(f"iter {i} D real {err_real:.4f} D fake {err_fake:.4f} G {err_g:.4f}")


if __name__ == "__main__":
    Trainer().train()
