"""ESRGAN-style model wraps only the trained generator in DistributedDataParallel and runs the frozen VGG netF as a plain module.

source: https://github.com/pytorch/pytorch/issues/45325
kind: lookalike
"""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


def define_F(use_bn=False):
    netF = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1))
    netF.eval()
    for k, v in netF.named_parameters():
        v.requires_grad = False
    return netF


def main(rank, world_size):
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = '29652'
    dist.init_process_group('gloo', rank=rank, world_size=world_size)
    torch.manual_seed(0)
    netG = DistributedDataParallel(nn.Conv2d(3, 3, 3, padding=1))
    netF = define_F(use_bn=False)
    optimizer_G = torch.optim.Adam(netG.parameters(), lr=1e-4)
    lr_img, hr_img = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
    fake_H = netG(lr_img)
    l_g_fea = nn.functional.l1_loss(netF(fake_H), netF(hr_img).detach())
    optimizer_G.zero_grad()
    l_g_fea.backward()
    optimizer_G.step()
    dist.destroy_process_group()


if __name__ == '__main__':
    mp.spawn(main, args=(2,), nprocs=2, join=True)
