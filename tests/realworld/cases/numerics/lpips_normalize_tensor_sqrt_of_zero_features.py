"""LPIPS normalize_tensor divides the features by sqrt(sum(in_feat**2)) + eps: at a position where every ReLU channel is zero the square root's derivative is infinite and 0 * inf gives NaN, which anomaly detection reports in the backward of the generator's training step (the eps belongs under the square root).

source: https://github.com/richzhang/PerceptualSimilarity/issues/69
kind: bug
symptom: crash
verified: RuntimeError: Function 'SqrtBackward0' returned nan values in its 0th output.
"""
import torch
import torch.nn as nn


def normalize_tensor(in_feat, eps=1e-10):
    norm_factor = torch.sqrt(torch.sum(in_feat ** 2, dim=1, keepdim=True))  # ROOT
    return in_feat / (norm_factor + eps)


def spatial_average(in_tens, keepdim=True):
    return in_tens.mean([2, 3], keepdim=keepdim)


class LPIPS(nn.Module):
    """Cut-down LPIPS: a small ReLU feature net stands in for the AlexNet/VGG slices."""

    def __init__(self, chns=(4, 8)):
        super().__init__()
        self.slices = nn.ModuleList([
            nn.Sequential(nn.Conv2d(3, chns[0], 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.Conv2d(chns[0], chns[1], 3, padding=1), nn.ReLU())])
        self.lins = nn.ModuleList([nn.Conv2d(c, 1, 1, bias=False) for c in chns])
        self.requires_grad_(False)  # lpips.LPIPS: a fixed, pretrained metric

    def forward(self, in0, in1):
        val = 0
        feats0, feats1 = in0, in1
        for slice_, lin in zip(self.slices, self.lins):
            feats0, feats1 = slice_(feats0), slice_(feats1)
            diff = (normalize_tensor(feats0) - normalize_tensor(feats1)) ** 2
            val = val + spatial_average(lin(diff))
        return val


torch.manual_seed(0)
loss_fn = LPIPS()
generator = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.Tanh())
optimizer = torch.optim.Adam(generator.parameters(), lr=1e-3)
with torch.autograd.set_detect_anomaly(True):
    for step in range(3):
        img0, img1 = torch.rand(2, 3, 16, 16) * 2 - 1, torch.rand(2, 3, 16, 16) * 2 - 1
        d = loss_fn(generator(img0), img1).mean()
        optimizer.zero_grad()
        d.backward()  # SYMPTOM
        optimizer.step()
print(step, d.item())
