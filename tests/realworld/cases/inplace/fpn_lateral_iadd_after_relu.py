"""FPN head: adding the upsampled coarser map into a ReLU lateral with += fails in backward.

source: https://github.com/lyongo/NWPU-MOC/issues/4
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.FloatTensor [2, 8, 8, 8]], which is output 0 of Relu
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FPNHead(nn.Module):
    def __init__(self, in_channels=(4, 6, 8), out_channels=8):
        super().__init__()
        self.lateral_convs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(c, out_channels, 1), nn.ReLU()) for c in in_channels)

    def forward(self, inputs):
        laterals = [conv(x) for conv, x in zip(self.lateral_convs, inputs)]
        for i in range(len(laterals) - 1, 0, -1):
            prev_shape = laterals[i - 1].shape[2:]
            laterals[i - 1] += F.interpolate(laterals[i], size=prev_shape, mode="nearest")  # ROOT
        return laterals


head = FPNHead()
opt = torch.optim.SGD(head.parameters(), lr=0.01)
feats = [torch.randn(2, 4, 16, 16), torch.randn(2, 6, 8, 8), torch.randn(2, 8, 4, 4)]
outs = head(feats)
loss = sum(o.mean() for o in outs)
loss.backward()  # SYMPTOM
opt.step()
