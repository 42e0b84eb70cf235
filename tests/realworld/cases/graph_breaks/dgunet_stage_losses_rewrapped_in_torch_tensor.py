"""DGUNet training: the per-stage losses are rebuilt with torch.tensor(..., requires_grad=True), so PSNR never changes.

source: https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6
kind: bug
symptom: silent
verified: every model_restoration parameter's .grad stays None; the weights never change
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CharbonnierLoss(nn.Module):
    def __init__(self, eps=1e-3):
        super().__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        return torch.mean(torch.sqrt(diff * diff + self.eps * self.eps))


class EdgeLoss(nn.Module):
    def __init__(self):
        super().__init__()
        k = torch.tensor([[0., 1., 0.], [1., -4., 1.], [0., 1., 0.]])
        self.register_buffer("kernel", k.view(1, 1, 3, 3).repeat(3, 1, 1, 1))
        self.loss = CharbonnierLoss()

    def forward(self, x, y):
        edge = lambda img: F.conv2d(img, self.kernel, padding=1, groups=3)  # noqa: E731
        return self.loss(edge(x), edge(y))


class DGUNet(nn.Module):
    def __init__(self, stages=3):
        super().__init__()
        self.stages = nn.ModuleList(nn.Conv2d(3, 3, 3, padding=1) for _ in range(stages))

    def forward(self, x):
        restored = []
        for stage in self.stages:
            x = x + stage(x)
            restored.insert(0, x)
        return restored


torch.manual_seed(0)
model_restoration = DGUNet()
optimizer = torch.optim.Adam(model_restoration.parameters(), lr=2e-4)
criterion_char, criterion_edge = CharbonnierLoss(), EdgeLoss()
input_, target = torch.rand(2, 3, 16, 16), torch.rand(2, 3, 16, 16)
for epoch in range(2):
    optimizer.zero_grad()
    restored = model_restoration(input_)
    loss_char = torch.tensor([criterion_char(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()  # ROOT
    loss_edge = torch.tensor([criterion_edge(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()
    loss = (loss_char) + (0.05 * loss_edge)
    loss.backward()
    optimizer.step()
