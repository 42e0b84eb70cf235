"""OpenPCDet: a backbone "frozen" with torch.no_grad() in its forward still drifts, the adam_onecycle wrapper decays it.

source: https://github.com/open-mmlab/OpenPCDet/issues/845
kind: bug
symptom: silent
verified: backbone conv weight shrinks every step (decoupled weight decay) although no gradient reaches it
"""
import torch
import torch.nn as nn


class VoxelBackBone8x(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_input = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.ReLU())

    def forward(self, x):
        with torch.no_grad():  # ROOT
            return self.conv_input(x)


class OptimWrapper():
    def __init__(self, opt, wd, true_wd=True):
        self.opt, self.wd, self.true_wd = opt, wd, true_wd

    def step(self):
        if self.true_wd:
            for pg in self.opt.param_groups:
                for p in pg['params']:
                    if p.requires_grad is False:
                        continue
                    p.data.mul_(1 - self.wd * pg['lr'])
        self.opt.step()

    def zero_grad(self):
        self.opt.zero_grad()


torch.manual_seed(0)
backbone_3d = VoxelBackBone8x()
dense_head = nn.Conv2d(8, 2, 1)
model = nn.ModuleDict({'backbone_3d': backbone_3d, 'dense_head': dense_head})
optimizer = OptimWrapper(torch.optim.Adam(model.parameters(), lr=0.003, betas=(0.9, 0.99)), wd=0.01)
before = backbone_3d.conv_input[0].weight.detach().clone()
for it in range(3):
    voxels, targets = torch.randn(2, 4, 8, 8), torch.randn(2, 2, 8, 8)
    loss = nn.functional.mse_loss(dense_head(backbone_3d(voxels)), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("backbone grad:", backbone_3d.conv_input[0].weight.grad,
      "changed:", not torch.equal(before, backbone_3d.conv_input[0].weight))
