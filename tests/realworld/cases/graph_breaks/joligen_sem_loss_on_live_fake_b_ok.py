"""joliGEN's CycleGAN semantic model as the reviewer of PR#20 wants it: pfB is computed on the live fake_B, so loss_sem in loss_G trains the generator.

source: https://github.com/jolibrain/joliGEN/pull/20
kind: lookalike
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
        self.pfB = self.netf_s(self.fake_B)
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
