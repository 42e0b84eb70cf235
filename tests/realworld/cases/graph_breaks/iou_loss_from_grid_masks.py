"""IoU loss between two boxes built from 0/1 masks of grid points inside each box.

source: https://github.com/pytorch/pytorch/issues/2774
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
from torch.nn.modules.loss import _Loss

torch.manual_seed(0)


class IoU_real(_Loss):
    def __init__(self, bounds=(32, 32)):
        super().__init__()
        ys, xs = torch.meshgrid(torch.arange(bounds[0]), torch.arange(bounds[1]), indexing="ij")
        self.grid = torch.stack([xs, ys], dim=-1).float()

    def score_map(self, box):
        x0, y0, x1, y1 = box
        inside = ((self.grid[..., 0] >= x0) & (self.grid[..., 0] <= x1)  # ROOT
                  & (self.grid[..., 1] >= y0) & (self.grid[..., 1] <= y1))
        return inside.float()

    def forward(self, pred, target):
        m_pred, m_target = self.score_map(pred), self.score_map(target)
        intersection = (m_pred * m_target).sum()
        union = m_pred.sum() + m_target.sum() - intersection
        return 1 - intersection / union


net = nn.Linear(8, 4)
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
features = torch.randn(8)
pred = torch.sigmoid(net(features)) * 32
target = torch.tensor([4.0, 4.0, 20.0, 20.0])
loss = IoU_real()(pred, target)
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
