"""HDR-NeRF warm_crf stage builds its optimizer from the sum of several .parameters() generators.

source: https://github.com/xhuangcv/hdr-nerf/issues/24
kind: bug
symptom: crash
verified: TypeError: unsupported operand type(s) for +: 'generator' and 'generator'
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class NeRF(nn.Module):
    def __init__(self):
        super().__init__()
        self.pts_linears = nn.Linear(3, 16)
        self.exps_linears_r = nn.Linear(1, 8)
        self.exps_linears_g = nn.Linear(1, 8)
        self.exps_linears_b = nn.Linear(1, 8)
        self.r_l_linner = nn.Linear(8, 1)
        self.g_l_linner = nn.Linear(8, 1)
        self.b_l_linner = nn.Linear(8, 1)


def warm_crf(model, n_iters=3):
    params_to_train = (model.exps_linears_r.parameters() + model.exps_linears_g.parameters()  # ROOT
                       + model.exps_linears_b.parameters() + model.r_l_linner.parameters()
                       + model.g_l_linner.parameters() + model.b_l_linner.parameters())
    optimizer_crf = torch.optim.Adam(params_to_train, lr=5e-4)
    for _ in range(n_iters):
        exps = torch.rand(16, 1)
        r = model.r_l_linner(torch.tanh(model.exps_linears_r(exps)))
        g = model.g_l_linner(torch.tanh(model.exps_linears_g(exps)))
        b = model.b_l_linner(torch.tanh(model.exps_linears_b(exps)))
        loss = ((torch.cat([r, g, b], 1) - exps) ** 2).mean()
        optimizer_crf.zero_grad()
        loss.backward()
        optimizer_crf.step()


warm_crf(NeRF())
