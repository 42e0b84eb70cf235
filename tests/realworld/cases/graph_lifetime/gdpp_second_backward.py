"""PGAN with GDPP: the generator's adversarial loss is backpropagated, then the GDPP loss on the same features.

source: https://github.com/facebookresearch/pytorch_GAN_zoo/issues/83
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2))
        self.decision = nn.Linear(32, 1)

    def forward(self, x, getFeature=False):
        phi = self.features(x)
        out = self.decision(phi)
        return (out, phi) if getFeature else out


def GDPPLoss(phiFake, phiReal):
    def eig(phi):
        a = phi / phi.norm(dim=1, keepdim=True)
        return torch.linalg.eigh(a.t() @ a)

    fake_vals, fake_vecs = eig(phiFake)
    real_vals, real_vecs = eig(phiReal)
    return (fake_vals - real_vals).pow(2).mean() + (fake_vecs - real_vecs).abs().mean()


netG = nn.Sequential(nn.Linear(8, 16), nn.Tanh())
netD = Discriminator()
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3)
real = torch.randn(12, 16)

optimizerG.zero_grad()
inputLatent = torch.randn(12, 8)
predFakeG, phiGFake = netD(netG(inputLatent), True)
lossGFake = -predFakeG.mean()
lossGFake.backward()  # ROOT
_, phiDReal = netD(real, True)
lossGGDPP = GDPPLoss(phiGFake, phiDReal.detach())
lossGGDPP.backward()  # SYMPTOM
optimizerG.step()
