"""Vector Neurons' `VNBatchNorm` after the merged "avoiding nan" PR: the feature-vector norm is `torch.norm(x, dim=2) + EPS`, so a zero feature vector (a zero-padded point) is divided by EPS instead of 0, its normalised value stays 0, and the loss, the gradients and the weights stay finite.

source: https://github.com/FlyingGiraffe/vnn/pull/4
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-6


class VNBatchNorm(nn.Module):
    def __init__(self, num_features, dim):
        super().__init__()
        self.dim = dim
        self.bn = nn.BatchNorm1d(num_features) if dim in (3, 4) else nn.BatchNorm2d(num_features)

    def forward(self, x):
        """x: point features of shape [B, N_feat, 3, N_samples, ...]"""
        norm = torch.norm(x, dim=2) + EPS
        norm_bn = self.bn(norm)
        norm = norm.unsqueeze(2)
        norm_bn = norm_bn.unsqueeze(2)
        x = x / norm * norm_bn
        return x


class VNLinearLeakyReLU(nn.Module):
    def __init__(self, in_channels, out_channels, dim=4, negative_slope=0.2):
        super().__init__()
        self.negative_slope = negative_slope
        self.map_to_feat = nn.Linear(in_channels, out_channels, bias=False)
        self.batchnorm = VNBatchNorm(out_channels, dim=dim)
        self.map_to_dir = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x):
        p = self.map_to_feat(x.transpose(1, -1)).transpose(1, -1)
        p = self.batchnorm(p)
        d = self.map_to_dir(x.transpose(1, -1)).transpose(1, -1)
        dotprod = (p * d).sum(2, keepdims=True)
        mask = (dotprod >= 0).float()
        d_norm_sq = (d * d).sum(2, keepdims=True)
        return self.negative_slope * p + (1 - self.negative_slope) * (
            mask * p + (1 - mask) * (p - (dotprod / (d_norm_sq + EPS)) * d))


class VNPointClassifier(nn.Module):
    """VN layers on the points, mean pooling, rotation-invariant norms into a linear head."""

    def __init__(self, num_classes=3):
        super().__init__()
        self.vn1 = VNLinearLeakyReLU(1, 16)
        self.vn2 = VNLinearLeakyReLU(16, 32)
        self.head = nn.Linear(32, num_classes)

    def forward(self, points):  # points: [B, N, 3]
        x = points.transpose(1, 2).unsqueeze(1)  # [B, 1, 3, N]
        x = self.vn2(self.vn1(x)).mean(dim=-1)  # [B, 32, 3]
        return self.head(x.norm(dim=2))


torch.manual_seed(0)
model = VNPointClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
points = torch.randn(8, 32, 3)
points[:, -2:] = 0.0  # clouds zero-padded to 32 points
labels = torch.randint(0, 3, (8,))
for step in range(2):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(points), labels)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
print("NaN in VN weights:", torch.isnan(model.vn1.map_to_feat.weight).any().item())
