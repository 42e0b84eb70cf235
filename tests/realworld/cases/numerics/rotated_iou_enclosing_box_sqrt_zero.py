"""Enclosing-box side length sqrt((y2-y1)^2 + (x2-x1)^2) is 0 for coincident corners: NaN gradients.

source: https://github.com/lilanxiao/Rotated_IoU/issues/20
kind: bug
symptom: silent
verified: pred.grad contains nan after the GIoU loss backward
"""
import torch


def side_length(x1, y1, x2, y2):
    return torch.sqrt((y2 - y1).square() + (x2 - x1).square())  # ROOT


def enclosing_diag(corners1, corners2):
    pts = torch.cat([corners1, corners2], dim=0)
    x1, y1 = pts[:, 0].min(), pts[:, 1].min()
    x2, y2 = pts[:, 0].max(), pts[:, 1].max()
    return side_length(x1, y1, x2, y1) + side_length(x2, y1, x2, y2) + side_length(x1, y1, x1, y1)


pred = torch.tensor([[0., 0.], [1., 0.], [1., 1.], [0., 1.]], requires_grad=True)
target = torch.tensor([[0., 0.], [1., 0.], [1., 1.], [0., 1.]])
loss = 1 - 2.0 / enclosing_diag(pred, target)
loss.backward()
print(loss.item(), pred.grad)
