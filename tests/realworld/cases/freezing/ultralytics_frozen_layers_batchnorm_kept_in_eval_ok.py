"""Ultralytics-style freezing with the frozen layers' BatchNorm modules put back in eval mode after every model.train() (the pull request's change): the frozen layers keep their pretrained statistics and outputs while the rest trains.

source: https://github.com/ultralytics/ultralytics/pull/8753
kind: lookalike
"""
import torch
import torch.nn as nn


class Conv(nn.Module):
    def __init__(self, c1, c2, k=3, s=1):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class DetectionModel(nn.Module):
    def __init__(self, nc=3):
        super().__init__()
        self.model = nn.Sequential(Conv(3, 8, 3, 2), Conv(8, 16, 3, 2), Conv(16, 16), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten(), nn.Linear(16, nc))

    def forward(self, x):
        return self.model(x)


class BaseTrainer:
    def __init__(self, model, freeze=2, epochs=3):
        self.model, self.epochs = model, epochs
        freeze_list = range(freeze)
        freeze_layer_names = [f"model.{x}." for x in freeze_list]
        self.freeze_layer_names = freeze_layer_names
        for k, v in self.model.named_parameters():
            if any(x in k for x in freeze_layer_names):
                v.requires_grad = False
        self.optimizer = torch.optim.SGD([p for p in self.model.parameters() if p.requires_grad], lr=0.01, momentum=0.9)

    def _do_train(self, batches):
        for epoch in range(self.epochs):
            self.model.train()
            for name, m in self.model.named_modules():
                if isinstance(m, nn.BatchNorm2d) and any(name.startswith(x) for x in self.freeze_layer_names):
                    m.eval()  # keep the frozen layers' statistics
            for imgs, cls in batches:
                loss = nn.functional.cross_entropy(self.model(imgs), cls)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
        return loss


torch.manual_seed(0)
model = DetectionModel()
model.model[0].bn.running_mean.normal_(0.0, 0.5)  # stands in for the pretrained statistics
model.model[0].bn.running_var.uniform_(0.5, 2.0)
pretrained_mean = model.model[0].bn.running_mean.clone()
probe = torch.rand(2, 3, 32, 32)
model.eval()
with torch.no_grad():
    frozen_before = model.model[:2](probe)
trainer = BaseTrainer(model)
batches = [(torch.rand(8, 3, 32, 32) * 2 + 1, torch.randint(0, 3, (8,))) for _ in range(4)]
loss = trainer._do_train(batches)
model.eval()
with torch.no_grad():
    frozen_after = model.model[:2](probe)
print("loss", loss.item(), (frozen_after - frozen_before).abs().max().item())
