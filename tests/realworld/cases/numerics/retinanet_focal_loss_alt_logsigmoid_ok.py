"""RetinaNet's alternative focal loss computed with F.logsigmoid, stable for a confidently wrong logit.

source: https://github.com/kuangliu/pytorch-retinanet/issues/17
kind: lookalike
verified: the loss is finite and cls_head.weight.grad has no NaN
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def one_hot_embedding(labels, num_classes):
    return torch.eye(num_classes)[labels]


class FocalLoss(nn.Module):
    def __init__(self, num_classes=3):
        super(FocalLoss, self).__init__()
        self.num_classes = num_classes

    def focal_loss_alt(self, x, y):
        alpha = 0.25
        t = one_hot_embedding(y.data.cpu(), 1 + self.num_classes)
        t = t[:, 1:]
        xt = x * (2 * t - 1)
        w = alpha * t + (1 - alpha) * (1 - t)
        loss = -w * F.logsigmoid(2 * xt + 1) / 2
        return loss.sum()

    def forward(self, cls_preds, cls_targets):
        pos_neg = cls_targets > -1
        masked_cls_preds = cls_preds[pos_neg].view(-1, self.num_classes)
        return self.focal_loss_alt(masked_cls_preds, cls_targets[pos_neg])


torch.manual_seed(0)
cls_head = nn.Linear(4, 3)
criterion = FocalLoss(num_classes=3)
optimizer = torch.optim.SGD(cls_head.parameters(), lr=1e-2)
features = torch.tensor([[30.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4]])
with torch.no_grad():
    cls_head.weight.copy_(torch.eye(3, 4) * 2.0)
cls_targets = torch.tensor([0, 2])
loss = criterion(cls_head(features), cls_targets)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print("loss", loss.item(), "nan grad:", torch.isnan(cls_head.weight.grad).any().item())
