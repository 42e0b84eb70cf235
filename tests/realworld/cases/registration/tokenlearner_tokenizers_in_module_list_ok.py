"""tokenlearner-pytorch's TokenLearner after the fix: the SpatialAttention tokenizers are held in an nn.ModuleList, so their conv and BatchNorm weights are registered, returned by model.parameters() and trained with the classifier head.

source: https://github.com/rish-16/tokenlearner-pytorch/issues/5
kind: lookalike
"""
import torch
import torch.nn as nn


class SpatialAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 1, kernel_size=(1, 1), stride=1), nn.BatchNorm2d(1), nn.ReLU())

    def forward(self, x):
        B, H, W, C = x.shape
        x = x.view(B, C, H, W)
        mx = torch.max(x, 1)[0].unsqueeze(1)
        avg = torch.mean(x, 1).unsqueeze(1)
        combined = torch.cat([mx, avg], dim=1)
        fmap = self.conv(combined)
        weight_map = torch.sigmoid(fmap)
        out = (x * weight_map).mean(dim=(-2, -1))
        return out, x * weight_map


class TokenLearner(nn.Module):
    def __init__(self, S) -> None:
        super().__init__()
        self.S = S
        self.tokenizers = nn.ModuleList([SpatialAttention() for _ in range(S)])

    def forward(self, x):
        B, _, _, C = x.shape
        Z = torch.Tensor(B, self.S, C)
        for i in range(self.S):
            Ai, _ = self.tokenizers[i](x)
            Z[:, i, :] = Ai
        return Z


class Classifier(nn.Module):
    def __init__(self, S=4, C=16, n_classes=3):
        super().__init__()
        self.token_learner = TokenLearner(S)
        self.head = nn.Linear(S * C, n_classes)

    def forward(self, x):
        return self.head(self.token_learner(x).flatten(1))


torch.manual_seed(0)
model = Classifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
tokenizers = model.token_learner.tokenizers
start = [m.conv[0].weight.detach().clone() for m in tokenizers]
x, y = torch.randn(32, 8, 8, 16), torch.randint(0, 3, (32,))
for _ in range(30):
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
moved = sum((m.conv[0].weight - w).norm() for m, w in zip(tokenizers, start)).item()
grad = sum(m.conv[0].weight.grad.norm() for m in tokenizers).item()
print("parameter tensors", len(list(model.parameters())), "tokenizers moved", moved, "grad", grad)
