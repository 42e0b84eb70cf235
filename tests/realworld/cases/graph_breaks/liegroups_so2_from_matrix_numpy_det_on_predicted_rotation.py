"""liegroups' SO2.from_matrix validates the matrix with np.linalg.det(mat.cpu().numpy()); called in a loss on rotation_ab_pred, a network output that requires grad, it fails before the loss is built.

source: https://github.com/utiasSTARS/liegroups/issues/4
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
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
        det_check = isclose(torch.as_tensor(np.linalg.det(mat.cpu().numpy())), 1., tol=1e-5)  # ROOT
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
