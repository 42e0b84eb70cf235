"""Generative adversarial perturbations: the generator output is normalized per channel out of place.

source: https://github.com/OmidPoursaeed/Generative_Adversarial_Perturbations/issues/4
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
mean_arr = [0.485, 0.456, 0.406]
stddev_arr = [0.229, 0.224, 0.225]
mag_in = 10.0


def normalize_and_scale(delta_im, mode='train'):
    delta_im = delta_im + 1
    delta_im = delta_im * 0.5
    mean = torch.tensor(mean_arr).view(1, 3, 1, 1)
    std = torch.tensor(stddev_arr).view(1, 3, 1, 1)
    delta_im = (delta_im - mean) / std
    bs = delta_im.size(0)
    for i in range(bs):
        for ci in range(3):
            l_inf_channel = delta_im[i, ci, :, :].detach().abs().max()
            mag_in_scaled_c = mag_in / (255.0 * stddev_arr[ci])
            delta_im[i, ci, :, :] = delta_im[i, ci, :, :].clone() * np.minimum(1.0, mag_in_scaled_c / l_inf_channel.item())
    return delta_im


netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
pretrained_clf = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))
for p in pretrained_clf.parameters():
    p.requires_grad = False
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
noise = torch.rand(2, 3, 16, 16)
image = torch.randn(2, 3, 16, 16)
target = torch.randint(0, 10, (2,))
for itr in range(2):
    delta_im = netG(noise)
    delta_im = normalize_and_scale(delta_im, 'train')
    recons = image + delta_im
    output = pretrained_clf(recons)
    loss = -nn.functional.cross_entropy(output, target)
    optimizerG.zero_grad()
    loss.backward()
    optimizerG.step()
