"""kornia's binary_focal_loss_with_logits with the fix proposed in the thread: eps is added inside both pow terms, torch.pow(1. - probs + eps, gamma) and torch.pow(probs + eps, gamma), so a saturated logit with 0 < gamma < 1 gets a finite gradient.

source: https://github.com/kornia/kornia/issues/918
kind: lookalike
"""
import torch
import torch.nn as nn


def binary_focal_loss_with_logits(input, target, alpha=0.25, gamma=2.0, reduction="none", eps=1e-8):
    probs = torch.sigmoid(input)
    loss_tmp = -alpha * torch.pow((1. - probs + eps), gamma) * target * torch.log(probs + eps) \
        - (1 - alpha) * torch.pow(probs + eps, gamma) * (1. - target) * torch.log(1. - probs + eps)
    if reduction == "none":
        loss = loss_tmp
    elif reduction == "mean":
        loss = torch.mean(loss_tmp)
    elif reduction == "sum":
        loss = torch.sum(loss_tmp)
    else:
        raise NotImplementedError(f"Invalid reduction mode: {reduction}")
    return loss


prediction = torch.tensor([[-100., -100., 100., 100.]], requires_grad=True)
target = torch.tensor([[0., 1., 0., 1.]])
loss = binary_focal_loss_with_logits(prediction, target, gamma=0.5, reduction="mean")
loss.backward()
print("repro loss", loss.item(), "nan grads", int(prediction.grad.isnan().sum()), "of", prediction.grad.numel())

torch.manual_seed(0)
features = torch.cat([torch.randn(32, 8) + 6.0, torch.randn(32, 8) - 6.0])
labels = torch.cat([torch.ones(32, 1), torch.zeros(32, 1)])
classifier = nn.Linear(8, 1)
nn.init.constant_(classifier.weight, 2.0)
nn.init.zeros_(classifier.bias)
optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)
for step in range(3):
    optimizer.zero_grad()
    loss = binary_focal_loss_with_logits(classifier(features), labels, gamma=0.5, reduction="mean")
    loss.backward()
    if step == 0:
        print("step 0 loss", loss.item(), "nan weight grads", int(classifier.weight.grad.isnan().sum()),
              "max abs grad", classifier.weight.grad.abs().max().item())
    optimizer.step()
print("weight all NaN", bool(classifier.weight.isnan().all()))
