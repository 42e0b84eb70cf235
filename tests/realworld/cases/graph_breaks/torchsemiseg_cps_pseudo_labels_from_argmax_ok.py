"""TorchSemiSeg cross pseudo supervision: each branch's pseudo-label is `_, max_l = torch.max(pred_l, dim=1)`, integer class indices with no gradient, so the stop-gradient the paper asks for on Y holds without an explicit detach (the maintainer's answer).

source: https://github.com/charlesCXK/TorchSemiSeg/issues/45
kind: lookalike
"""
import torch
import torch.nn as nn


def make_branch(num_classes=4):
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, num_classes, 1))


torch.manual_seed(0)
branch1, branch2 = make_branch(), make_branch()
criterion = nn.CrossEntropyLoss(reduction='mean', ignore_index=255)
optimizer_l = torch.optim.SGD(branch1.parameters(), lr=0.01, momentum=0.9)
optimizer_r = torch.optim.SGD(branch2.parameters(), lr=0.01, momentum=0.9)
cps_weight = 1.5
for it in range(2):
    imgs, gts = torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16))
    unsup_imgs = torch.randn(2, 3, 16, 16)
    optimizer_l.zero_grad()
    optimizer_r.zero_grad()
    image = torch.cat([imgs, unsup_imgs], dim=0)
    pred_l, pred_r = branch1(image), branch2(image)
    _, max_l = torch.max(pred_l, dim=1)
    _, max_r = torch.max(pred_r, dim=1)
    max_l = max_l.long()
    max_r = max_r.long()
    cps_loss = criterion(pred_l, max_r) + criterion(pred_r, max_l)
    cps_loss = cps_loss * cps_weight
    loss_sup = criterion(pred_l[:2], gts)
    loss_sup_r = criterion(pred_r[:2], gts)
    loss = loss_sup + loss_sup_r + cps_loss
    loss.backward()
    optimizer_l.step()
    optimizer_r.step()
    print(it, loss.item())
