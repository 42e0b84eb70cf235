"""kornia's rotation_matrix_to_quaternion after PR #1665: the trace > 0 branch takes torch.sqrt(trace + 1.0 + eps), so for a 180-degree rotation (trace == -1) the branch torch.where does not pick has a finite derivative and the pose refiner trains on batches with flipped initial poses.

source: https://github.com/kornia/kornia/pull/1665
kind: lookalike
"""
import torch
from torch import nn


def rotation_matrix_to_quaternion(rotation_matrix: torch.Tensor, eps: float = 1.0e-8) -> torch.Tensor:
    # order=QuaternionCoeffOrder.WXYZ; the deprecated XYZW branch left out

    def safe_zero_division(numerator: torch.Tensor, denominator: torch.Tensor) -> torch.Tensor:
        eps: float = torch.finfo(numerator.dtype).tiny
        return numerator / torch.clamp(denominator, min=eps)

    rotation_matrix_vec: torch.Tensor = rotation_matrix.reshape(*rotation_matrix.shape[:-2], 9)
    m00, m01, m02, m10, m11, m12, m20, m21, m22 = torch.chunk(rotation_matrix_vec, chunks=9, dim=-1)
    trace: torch.Tensor = m00 + m11 + m22

    def trace_positive_cond():
        sq = torch.sqrt(trace + 1.0 + eps) * 2.0  # sq = 4 * qw.
        qw = 0.25 * sq
        qx = safe_zero_division(m21 - m12, sq)
        qy = safe_zero_division(m02 - m20, sq)
        qz = safe_zero_division(m10 - m01, sq)
        return torch.cat((qw, qx, qy, qz), dim=-1)

    def cond_1():
        sq = torch.sqrt(1.0 + m00 - m11 - m22 + eps) * 2.0  # sq = 4 * qx.
        qw = safe_zero_division(m21 - m12, sq)
        qx = 0.25 * sq
        qy = safe_zero_division(m01 + m10, sq)
        qz = safe_zero_division(m02 + m20, sq)
        return torch.cat((qw, qx, qy, qz), dim=-1)

    def cond_2():
        sq = torch.sqrt(1.0 + m11 - m00 - m22 + eps) * 2.0  # sq = 4 * qy.
        qw = safe_zero_division(m02 - m20, sq)
        qx = safe_zero_division(m01 + m10, sq)
        qy = 0.25 * sq
        qz = safe_zero_division(m12 + m21, sq)
        return torch.cat((qw, qx, qy, qz), dim=-1)

    def cond_3():
        sq = torch.sqrt(1.0 + m22 - m00 - m11 + eps) * 2.0  # sq = 4 * qz.
        qw = safe_zero_division(m10 - m01, sq)
        qx = safe_zero_division(m02 + m20, sq)
        qy = safe_zero_division(m12 + m21, sq)
        qz = 0.25 * sq
        return torch.cat((qw, qx, qy, qz), dim=-1)

    where_2 = torch.where(m11 > m22, cond_2(), cond_3())
    where_1 = torch.where((m00 > m11) & (m00 > m22), cond_1(), where_2)
    quaternion: torch.Tensor = torch.where(trace > 0.0, trace_positive_cond(), where_1)
    return quaternion


class PoseRefiner(nn.Module):  # predicts a small rotation correction of the initial pose
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        nn.init.zeros_(self.net[2].weight)
        nn.init.zeros_(self.net[2].bias)

    def forward(self, feats, R_init):
        w = self.net(feats)
        zero = torch.zeros_like(w[:, 0])
        skew = torch.stack([zero, -w[:, 2], w[:, 1], w[:, 2], zero, -w[:, 0], -w[:, 1], w[:, 0], zero], -1).view(-1, 3, 3)
        return rotation_matrix_to_quaternion(R_init @ torch.linalg.matrix_exp(skew))


def random_rotation(n, scale=1.0):
    a = scale * torch.randn(n, 3)
    zero = torch.zeros(n)
    skew = torch.stack([zero, -a[:, 2], a[:, 1], a[:, 2], zero, -a[:, 0], -a[:, 1], a[:, 0], zero], -1).view(-1, 3, 3)
    return torch.linalg.matrix_exp(skew)


torch.manual_seed(0)
model = PoseRefiner()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
flip_x = torch.diag(torch.tensor([1.0, -1.0, -1.0]))  # a 180-degree turn about x: trace == -1
batches = [torch.cat([random_rotation(3), flip_x[None]])] + [random_rotation(4) for _ in range(2)]
for step, R_init in enumerate(batches):
    feats = torch.randn(4, 8)
    q_target = rotation_matrix_to_quaternion(R_init @ random_rotation(4, scale=0.05))  # the ground-truth poses
    q = model(feats, R_init)
    loss = (1.0 - (q * q_target).sum(-1).abs()).mean()
    optimizer.zero_grad()
    loss.backward()
    print(step, "loss", round(loss.item(), 4), "NaN in grads:", any(torch.isnan(p.grad).any().item() for p in model.parameters()))
    optimizer.step()
print("every refiner output weight NaN:", all(torch.isnan(p).all().item() for p in model.net[2].parameters()))
