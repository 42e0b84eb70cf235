"""IIC IID_loss floors the marginals p_i and p_j at EPS with masked assignment, but they are expand() views of one row or column.

source: https://github.com/xu-ji/IIC/issues/116
kind: bug
symptom: crash
verified: RuntimeError: unsupported operation: more than one element of the written-to tensor refers to a single memory location
"""
import sys

import torch
import torch.nn as nn


def compute_joint(x_out, x_tf_out):
    bn, k = x_out.size()
    p_i_j = x_out.unsqueeze(2) * x_tf_out.unsqueeze(1)
    p_i_j = p_i_j.sum(dim=0)
    p_i_j = (p_i_j + p_i_j.t()) / 2.
    return p_i_j / p_i_j.sum()


def IID_loss(x_out, x_tf_out, lamb=1.0, EPS=sys.float_info.epsilon):
    _, k = x_out.size()
    p_i_j = compute_joint(x_out, x_tf_out)
    p_i = p_i_j.sum(dim=1).view(k, 1).expand(k, k)
    p_j = p_i_j.sum(dim=0).view(1, k).expand(k, k)
    p_i_j[(p_i_j < EPS).data] = EPS
    p_j[(p_j < EPS).data] = EPS  # ROOT
    p_i[(p_i < EPS).data] = EPS
    loss = - p_i_j * (torch.log(p_i_j) - lamb * torch.log(p_j) - lamb * torch.log(p_i))
    return loss.sum()


class ClusterNet(nn.Module):
    def __init__(self, output_k=10, num_sub_heads=2):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.heads = nn.ModuleList([nn.Sequential(nn.Linear(128, output_k), nn.Softmax(dim=1))
                                    for _ in range(num_sub_heads)])

    def forward(self, x):
        features = self.trunk(x)
        return [head(features) for head in self.heads]


torch.manual_seed(0)
net = ClusterNet()
optimiser = torch.optim.Adam(net.parameters(), lr=1e-4)
imgs = torch.rand(16, 1, 24, 24)
imgs_tf = imgs + 0.05 * torch.randn_like(imgs)
x_outs, x_tf_outs = net(imgs), net(imgs_tf)
avg_loss_batch = sum(IID_loss(x_outs[i], x_tf_outs[i]) for i in range(len(x_outs))) / len(x_outs)
optimiser.zero_grad()
avg_loss_batch.backward()  # SYMPTOM
optimiser.step()
