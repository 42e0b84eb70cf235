"""Transfer-learning ResNet with frozen feature layers trained under a debugger hook that registers a gradient hook on every parameter.

source: https://github.com/aws/sagemaker-pytorch-training-toolkit/issues/197
kind: bug
symptom: crash
verified: RuntimeError: cannot register a hook on a tensor that doesn't require gradient
"""
import torch
import torch.nn as nn


class Hook:
    def __init__(self):
        self.grads = {}

    def _save_grad(self, name):
        def _hook(grad):
            self.grads[name] = grad.norm().item()
        return _hook

    def register_module(self, module):
        for name, param in module.named_parameters():
            param.register_hook(self._save_grad(name))  # ROOT


def build_model(num_classes=5):
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, num_classes))
    for param in model.parameters():
        param.requires_grad = False
    model[5] = nn.Linear(16, num_classes)
    return model


def train_epoch(train_loader, model, loss_fn, optimizer):
    model.train()
    for data, target in train_loader:
        outputs = model(data)
        loss = loss_fn(outputs, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
model = build_model()
hook = Hook()
hook.register_module(model)
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
train_loader = [(torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))) for _ in range(2)]
train_epoch(train_loader, model, nn.CrossEntropyLoss(), optimizer)
