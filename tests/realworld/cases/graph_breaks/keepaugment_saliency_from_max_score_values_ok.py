"""KeepAugment saliency: backward from the values of torch.max over the class scores, which are differentiable.

source: https://github.com/cjf8899/KeepAugment_Pytorch/issues/1
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 10))
model.eval()
images_half = torch.rand(4, 3, 16, 16)
images_half.requires_grad = True

preds = model(images_half)
score, _ = torch.max(preds, 1)
score.mean().backward()
slc_, _ = torch.max(torch.abs(images_half.grad), dim=1)
print(slc_.shape, slc_.sum().item() > 0)
