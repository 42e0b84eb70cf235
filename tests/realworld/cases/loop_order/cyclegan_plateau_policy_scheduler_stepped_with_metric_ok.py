"""CycleGAN with --lr_policy plateau: update_learning_rate passes the epoch metric to the plateau scheduler.

source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/495
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.optim import lr_scheduler

torch.manual_seed(0)


class opt:
    lr_policy = 'plateau'
    lr = 2e-4
    n_epochs = 2


def get_scheduler(optimizer, opt):
    if opt.lr_policy == 'step':
        scheduler = lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.1)
    elif opt.lr_policy == 'plateau':
        scheduler = lr_scheduler.ReduceLROnPlateau(optimizer, mode='min', factor=0.2, threshold=0.01, patience=5)
    return scheduler


class BaseModel:
    def __init__(self, opt):
        self.netG = nn.Conv2d(3, 3, 3, padding=1)
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizers = [self.optimizer_G]
        self.schedulers = [get_scheduler(o, opt) for o in self.optimizers]

    def optimize_parameters(self, real_A, real_B):
        self.optimizer_G.zero_grad()
        self.loss_G = nn.functional.l1_loss(self.netG(real_A), real_B)
        self.loss_G.backward()
        self.optimizer_G.step()

    def update_learning_rate(self, metric):
        for scheduler in self.schedulers:
            if opt.lr_policy == 'plateau':
                scheduler.step(metric)
            else:
                scheduler.step()


model = BaseModel(opt)
for epoch in range(opt.n_epochs):
    for i in range(3):
        model.optimize_parameters(torch.randn(1, 3, 8, 8), torch.randn(1, 3, 8, 8))
    model.update_learning_rate(model.loss_G.item())
