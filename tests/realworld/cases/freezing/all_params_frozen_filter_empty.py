"""Fine-tuning script freezes every parameter, then filters trainable ones for Adam.

source: https://github.com/lxztju/pytorch_classification/issues/13
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn
import torch.optim as optim


class cfg:
    LR = 1e-3
    NUM_CLASSES = 3


def build_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(8, cfg.NUM_CLASSES))


torch.manual_seed(0)
model = build_model()
for param in model.parameters():
    param.requires_grad = False  # ROOT
optimizer = optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=cfg.LR)  # SYMPTOM
criterion = nn.CrossEntropyLoss()
x, y = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 0])
loss = criterion(model(x), y)
loss.backward()
optimizer.step()
