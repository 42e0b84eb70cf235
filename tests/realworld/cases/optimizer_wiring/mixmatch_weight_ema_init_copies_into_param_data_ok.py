"""MixMatch WeightEMA.__init__ with the PR's fix, param.data.copy_(ema_param.data): the trained model starts from the EMA model's weights, so the EMA really averages the trained weights.

source: https://github.com/YU1ut/MixMatch-pytorch/pull/23
kind: lookalike
verified: model and ema_model start equal (0.0) and are 0.026 apart after 20 steps
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class WideResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        return self.fc(F.adaptive_avg_pool2d(F.relu(self.bn(self.conv(x))), 1).flatten(1))


class WeightEMA(object):
    def __init__(self, model, ema_model, lr, alpha=0.999):
        self.model = model
        self.ema_model = ema_model
        self.alpha = alpha
        self.params = list(model.state_dict().values())
        self.ema_params = list(ema_model.state_dict().values())
        self.wd = 0.02 * lr

        for param, ema_param in zip(self.params, self.ema_params):
            param.data.copy_(ema_param.data)

    def step(self):
        one_minus_alpha = 1.0 - self.alpha
        for param, ema_param in zip(self.params, self.ema_params):
            if ema_param.dtype == torch.float32:
                ema_param.mul_(self.alpha)
                ema_param.add_(param * one_minus_alpha)
                param.mul_(1 - self.wd)


def create_model(ema=False):
    model = WideResNet(num_classes=10)
    if ema:
        for param in model.parameters():
            param.detach_()
    return model


torch.manual_seed(0)
lr = 0.002
model = create_model()
ema_model = create_model(ema=True)
optimizer = torch.optim.Adam(model.parameters(), lr=lr)
ema_optimizer = WeightEMA(model, ema_model, lr, alpha=0.999)
print((model.conv.weight - ema_model.conv.weight).abs().max().item())
for batch_idx in range(20):
    inputs_x, targets_x = torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,))
    loss = F.cross_entropy(model(inputs_x), targets_x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ema_optimizer.step()
print((model.conv.weight - ema_model.conv.weight).abs().max().item())
