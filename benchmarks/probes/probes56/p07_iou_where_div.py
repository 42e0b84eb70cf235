"""A box IoU loss guarding the division with torch.where."""
import torch
import torch.nn as nn


def iou_loss(pred, gt):
    lt = torch.max(pred[:, :2], gt[:, :2])
    rb = torch.min(pred[:, 2:], gt[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    area_p = (pred[:, 2] - pred[:, 0]).clamp(min=0) * (pred[:, 3] - pred[:, 1]).clamp(min=0)
    area_g = (gt[:, 2] - gt[:, 0]) * (gt[:, 3] - gt[:, 1])
    union = area_p + area_g - inter
    iou = torch.where(union > 0, inter / union, torch.zeros_like(union))  # ROOT
    return (1 - iou).mean()


head = nn.Linear(6, 4)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
feats = torch.randn(3, 6)
gt = torch.tensor([[0., 0., 1., 1.], [0., 0., 0., 0.], [1., 1., 2., 3.]])
with torch.no_grad():
    head.weight.zero_()
    head.bias.zero_()
loss = iou_loss(head(feats), gt)
opt.zero_grad()
loss.backward()
print("nan grads:", torch.isnan(head.weight.grad).any().item())
opt.step()
