"""yolo3-pytorch adapted for meta-learning: during the freeze phase the backbone's parameters have requires_grad=False, and fit_one_epoch asks torch.autograd.grad(loss_value, model_train.parameters()) for every parameter, including the frozen ones.

source: https://github.com/bubbliiiing/yolo3-pytorch/issues/110
kind: bug
symptom: crash
verified: does not require grad
"""
import torch
import torch.nn as nn


class YoloBody(nn.Module):
    def __init__(self, num_anchors=3, num_classes=4):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.1),
                                      nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.LeakyReLU(0.1))
        self.last_layer0 = nn.Conv2d(16, num_anchors * (5 + num_classes), 1)

    def forward(self, x):
        return self.last_layer0(self.backbone(x))


def yolo_loss(output, target):
    return ((output - target) ** 2).mean()


def fit_one_epoch(model_train, optimizer, gen):
    for images, targets in gen:
        outputs = model_train(images)
        loss_value = yolo_loss(outputs, targets)
        grad = torch.autograd.grad(loss_value, model_train.parameters(), retain_graph=True)  # ROOT
        optimizer.zero_grad()
        loss_value.backward()
        optimizer.step()
        print(sum(g.norm() for g in grad).item())


torch.manual_seed(0)
model = YoloBody()
Freeze_Train = True
if Freeze_Train:
    for param in model.backbone.parameters():
        param.requires_grad = False
model_train = model.train()
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model_train.parameters()), lr=1e-3)
gen = [(torch.randn(2, 3, 32, 32), torch.randn(2, 27, 8, 8)) for _ in range(2)]
fit_one_epoch(model_train, optimizer, gen)
