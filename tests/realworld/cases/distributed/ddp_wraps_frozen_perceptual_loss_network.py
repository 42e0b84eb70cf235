"""pix2pixHD-style training wraps the frozen VGG perceptual criterion in DistributedDataParallel as well as the generator.

source: https://github.com/pytorch/pytorch/issues/25550
kind: bug
symptom: crash
verified: RuntimeError: DistributedDataParallel is not needed when a module doesn't have any parameter that requires a gradient.
"""
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn


class VGGLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.vgg = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
        for param in self.vgg.parameters():
            param.requires_grad = False

    def forward(self, x, y):
        return nn.functional.l1_loss(self.vgg(x), self.vgg(y).detach())


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29645'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    netG = nn.parallel.DistributedDataParallel(nn.Conv2d(3, 3, 3, padding=1))
    criterionPerceptron = VGGLoss()
    criterionPerceptron = nn.parallel.DistributedDataParallel(criterionPerceptron)  # ROOT
    optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4)
    for i in range(2):
        real_A, real_B = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
        loss_G = criterionPerceptron(netG(real_A), real_B)
        optimizer_G.zero_grad()
        loss_G.backward()
        optimizer_G.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
