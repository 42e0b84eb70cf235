"""joliGEN's CycleGAN semantic model as the reviewer of PR#20 wants it: pfB is computed on the live fake_B, so loss_sem in loss_G trains the generator; as in joliGEN, netD_A and netf_s are frozen during the generator step and trained by their own optimizers.

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
        self.optimizer_D = torch.optim.Adam(self.netD_A.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_f_s = torch.optim.Adam(self.netf_s.parameters(), lr=2e-4, betas=(0.5, 0.999))

    @staticmethod
    def set_requires_grad(nets, requires_grad):
        for net in nets:
            for param in net.parameters():
                param.requires_grad = requires_grad

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

    def backward_D(self):
        pred_real = self.netD_A(self.real_A)
        pred_fake = self.netD_A(self.fake_B.detach())
        loss_D = self.criterionGAN(pred_real, torch.ones_like(pred_real)) + self.criterionGAN(pred_fake, torch.zeros_like(pred_fake))
        loss_D.backward()

    def backward_f_s(self):
        loss_f_s = self.criterionf_s(self.netf_s(self.real_A), self.input_A_label)
        loss_f_s.backward()

    def optimize_parameters(self):
        self.set_requires_grad([self.netD_A, self.netf_s], False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        self.set_requires_grad([self.netD_A, self.netf_s], True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.optimizer_f_s.zero_grad()
        self.backward_f_s()
        self.optimizer_f_s.step()


torch.manual_seed(0)
model = CycleGANSemanticModel()
for it in range(3):
    model.forward(torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16)))
    model.optimize_parameters()
