"""torchlake's PixelCNN++ discretized logistic mixture loss slices the means, log-scales and channel coefficients out of the network output and then conditions each channel's mean on the previous channels by writing into the mean slice in place (`mu[:, :, i:i+1] = mu[:, :, i:i+1] + ...`); the slice is a view of the network output, whose log-scale slice `maximum` saved for backward, so the training step's `loss.backward()` fails.

source: https://github.com/gitE0Z9/pytorch-implementations/commit/35fbc49ad73c75d37ee51e004d458f90c2799f53
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

C, K = 3, 2  # colour channels, mixture components


class TinyPixelCNN(nn.Module):
    def __init__(self):
        super().__init__()
        out = K * (1 + 2 * C + C * (C - 1) // 2)
        self.body = nn.Sequential(nn.Conv2d(C, 16, 3, padding=1), nn.ELU(), nn.Conv2d(16, out, 1))

    def forward(self, x):
        b, _, h, w = x.shape
        return self.body(x).view(b, K, -1, h, w)


class DiscretizedLogisticMixture(nn.Module):
    def __init__(self, scale=2 / 255):
        super().__init__()
        self.scale = scale

    def forward(self, yhat, x):
        pi = yhat[:, :, 0:1]
        mu = yhat[:, :, 1:1 + C]
        log_sigma = yhat[:, :, 1 + C:1 + 2 * C]
        coef = yhat[:, :, 1 + 2 * C:].tanh()
        log_sigma = log_sigma.maximum(torch.full_like(log_sigma, -7.0))
        precision = (-log_sigma).exp()

        x = x[:, None]
        cursor = 0
        for i in range(1, C):
            mu[:, :, i:i + 1] = mu[:, :, i:i + 1] + (coef[:, :, cursor:cursor + i] * x[:, :, :i]).sum(2, keepdim=True)  # ROOT
            cursor += i

        centered = x - mu
        upper = torch.sigmoid(precision * (centered + self.scale / 2))
        lower = torch.sigmoid(precision * (centered - self.scale / 2))
        log_probs = torch.log((upper - lower).clamp_min(1e-12))
        return -(log_probs + F.log_softmax(pi, dim=1)).sum(1).mean()


model = TinyPixelCNN()
criterion = DiscretizedLogisticMixture()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_step(images):
    yhat = model(images * 2 - 1)
    loss = criterion(yhat, images * 2 - 1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


images = torch.randint(0, 256, (4, C, 8, 8)).float() / 255
for step in range(3):
    print(f"step {step}: nll {train_step(images):.4f}")
