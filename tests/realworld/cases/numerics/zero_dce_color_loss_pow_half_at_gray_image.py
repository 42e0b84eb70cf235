"""Zero-DCE++ color constancy loss: torch.pow(Drg^2 + Drb^2 + Dgb^2, 0.5) is the square root of 0 when the enhanced image is gray (e.g. a black frame), so the gradients are NaN.

source: https://github.com/Li-Chongyi/Zero-DCE_extension/issues/2
kind: bug
symptom: silent
verified: after one step on a batch with a black image every conv weight of the enhancement net is NaN
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class L_color(nn.Module):
    def __init__(self):
        super(L_color, self).__init__()

    def forward(self, x):
        b, c, h, w = x.shape
        mean_rgb = torch.mean(x, [2, 3], keepdim=True)
        mr, mg, mb = torch.split(mean_rgb, 1, dim=1)
        Drg = torch.pow(mr - mg, 2)
        Drb = torch.pow(mr - mb, 2)
        Dgb = torch.pow(mb - mg, 2)
        k = torch.pow(torch.pow(Drg, 2) + torch.pow(Drb, 2) + torch.pow(Dgb, 2), 0.5)  # ROOT
        return k


class enhance_net_nopool(nn.Module):
    def __init__(self):
        super(enhance_net_nopool, self).__init__()
        self.e_conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=True)
        self.e_conv2 = nn.Conv2d(8, 3, 3, 1, 1, bias=True)

    def enhance(self, x, x_r):
        for _ in range(4):
            x = x + x_r * (torch.pow(x, 2) - x)
        return x

    def forward(self, x):
        x_r = F.tanh(self.e_conv2(F.relu(self.e_conv1(x))))
        return self.enhance(x, x_r), x_r


torch.manual_seed(0)
DCE_net = enhance_net_nopool()
L_color_fn = L_color()
optimizer = torch.optim.Adam(DCE_net.parameters(), lr=1e-4, weight_decay=1e-4)
img_lowlight = torch.rand(4, 3, 16, 16) * 0.3
img_lowlight[2] = 0.0  # a black frame in the batch
enhanced_image, A = DCE_net(img_lowlight)
loss_col = 5 * torch.mean(L_color_fn(enhanced_image))
loss_TV = 1600 * A.diff(dim=-1).pow(2).mean()
loss = loss_TV + loss_col
optimizer.zero_grad()
loss.backward()
torch.nn.utils.clip_grad_norm_(DCE_net.parameters(), 0.1)
optimizer.step()
