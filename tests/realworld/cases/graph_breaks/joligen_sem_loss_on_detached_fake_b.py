"""joliGEN PR#20 works around an in-place error by computing the semantic prediction pfB on `fake_B.detach()` in backward_G; the reviewer notes the generator then gets nothing from loss_sem, which still adds to loss_G.

source: https://github.com/jolibrain/joliGEN/pull/20
kind: bug
symptom: silent
verified: on the same batch loss_G (2.597) and loss_sem (1.415) are equal in both forms, but the gradient loss_sem sends to netG_A is 0.0 where the live fake_B gives up to 0.0076 (max abs), and netG_A's total gradient differs by 0.0076
"""
import torch
import torch.nn as nn


class CycleGANSemanticModel:
    def __init__(self, lambda_sem=1.0):
        self.netG_A = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
        self.netD_A = nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3))
        self.netf_s = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1))
        self.criterionGAN = nn.MSELoss()
        self.criterionf_s = nn.CrossEntropyLoss()
        self.lambda_sem = lambda_sem
        self.optimizer_G = torch.optim.Adam(self.netG_A.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def forward(self, real_A, input_A_label):
        self.real_A, self.input_A_label = real_A, input_A_label
        self.fake_B = self.netG_A(self.real_A)

    def backward_G(self):
        pred_fake = self.netD_A(self.fake_B)
        self.loss_G_A = self.criterionGAN(pred_fake, torch.ones_like(pred_fake))
        self.pfB = self.netf_s(self.fake_B.detach())  # ROOT
        self.loss_sem_AB = self.lambda_sem * self.criterionf_s(self.pfB, self.input_A_label)
        self.loss_G = self.loss_G_A + self.loss_sem_AB
        self.loss_G.backward()

    def optimize_parameters(self):
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


torch.manual_seed(0)
model = CycleGANSemanticModel()
for it in range(3):
    model.forward(torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16)))
    model.optimize_parameters()
