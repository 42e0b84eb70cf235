"""liegroups' SO2.from_matrix after the fix: the validity check takes np.linalg.det of mat.detach().cpu().numpy(), so it can run on rotation_ab_pred inside a loss while the rotation itself keeps its graph.

source: https://github.com/utiasSTARS/liegroups/issues/4
kind: lookalike
verified: runs; the rotation head gets gradients through SO2.log
"""
import numpy as np
import torch
import torch.nn as nn


def isclose(mat1, mat2, tol=1e-6):
    return (mat1 - mat2).abs_().lt(tol)


class SO2(object):
    dim = 2

    def __init__(self, mat):
        self.mat = mat

    @classmethod
    def is_valid_matrix(cls, mat):
        if mat.dim() < 3:
            mat = mat.unsqueeze(dim=0)
        shape_check = mat.shape[1:3] == (cls.dim, cls.dim)
        det_check = isclose(torch.as_tensor(np.linalg.det(mat.detach().cpu().numpy())), 1., tol=1e-5)
        inv_check = isclose(mat.transpose(2, 1).bmm(mat), torch.eye(cls.dim, dtype=mat.dtype),
                            tol=1e-5).sum(dim=1).sum(dim=1) == cls.dim * cls.dim
        return shape_check & det_check & inv_check

    @classmethod
    def from_matrix(cls, mat, normalize=False):
        mat_is_valid = cls.is_valid_matrix(mat)
        if mat_is_valid.all() or normalize:
            return cls(mat)
        raise ValueError("Invalid rotation matrix. Use normalize=True to handle rounding errors.")

    def log(self):
        mat = self.mat if self.mat.dim() == 3 else self.mat.unsqueeze(0)
        return torch.atan2(mat[:, 1, 0], mat[:, 0, 0])


class RotationHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        theta = self.fc(x).squeeze(-1)
        c, s = torch.cos(theta), torch.sin(theta)
        return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


torch.manual_seed(0)
net = RotationHead()
x = torch.randn(32, 8)
angle_gt = torch.rand(32) * 2 - 1
rotation_ab_pred = net(x)
print('rotation_ab_pred size = {} type = {}'.format(rotation_ab_pred.size(), rotation_ab_pred.type()))
rvec_ab_pred = SO2.from_matrix(rotation_ab_pred)
loss = (rvec_ab_pred.log() - angle_gt).pow(2).mean()
loss.backward()
assert net.fc[0].weight.grad is not None
