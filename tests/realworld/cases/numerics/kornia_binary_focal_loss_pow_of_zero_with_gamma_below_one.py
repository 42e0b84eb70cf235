"""kornia's binary_focal_loss_with_logits weights the log terms with torch.pow(1. - probs, gamma) and torch.pow(probs, gamma): once a logit saturates, sigmoid returns exactly 1.0 (1. - probs is 0), and for 0 < gamma < 1 the derivative of pow at 0 is infinite, so the backward pass multiplies inf by the zero log term and the gradients are NaN.

source: https://github.com/kornia/kornia/issues/918
kind: bug
symptom: silent
verified: in the issue's repro the loss is finite (4.6052) and 4 of 4 prediction gradients are NaN; training a linear classifier whose logits saturate, the loss is 0.0 at the first step, all 8 weight gradients are NaN and the weight is all NaN after one SGD step; with eps inside the pow (the thread's fix) no gradient is NaN and the weight stays finite
"""
import torch
import torch.nn as nn


def binary_focal_loss_with_logits(input, target, alpha=0.25, gamma=2.0, reduction="none", eps=1e-8):
    probs = torch.sigmoid(input)
    loss_tmp = -alpha * torch.pow((1. - probs), gamma) * target * torch.log(probs + eps) \
        - (1 - alpha) * torch.pow(probs, gamma) * (1. - target) * torch.log(1. - probs + eps)  # ROOT
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
