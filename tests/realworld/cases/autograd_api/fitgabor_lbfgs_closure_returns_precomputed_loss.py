"""fitgabor trainer with a selectable optimizer: the LBFGS closure just returns the loss computed before it.

source: https://github.com/mohammadbashiri/fitgabor/pull/1
kind: bug
symptom: silent
verified: LBFGS re-evaluates the closure but gets the same loss and gradient, so it stops after one iteration each step
"""
import math
import torch
from torch import nn, optim


class GaborGenerator(nn.Module):
    def __init__(self, image_size=(16, 16)):
        super().__init__()
        self.theta = nn.Parameter(torch.rand(1) * math.pi)
        self.sigma = nn.Parameter(torch.tensor([3.0]))
        self.Lambda = nn.Parameter(torch.tensor([6.0]))
        self.psi = nn.Parameter(torch.tensor([0.0]))
        self.center = nn.Parameter(torch.zeros(2))
        ys, xs = torch.meshgrid(torch.linspace(-8, 8, image_size[0]), torch.linspace(-8, 8, image_size[1]), indexing="ij")
        self.register_buffer("xs", xs)
        self.register_buffer("ys", ys)

    def forward(self):
        x, y = self.xs - self.center[0], self.ys - self.center[1]
        x_theta = x * torch.cos(self.theta) + y * torch.sin(self.theta)
        y_theta = -x * torch.sin(self.theta) + y * torch.cos(self.theta)
        envelope = torch.exp(-(x_theta ** 2 + y_theta ** 2) / (2 * self.sigma ** 2))
        return (envelope * torch.cos(2 * math.pi * x_theta / self.Lambda + self.psi))[None, None]


def trainer_fn(gabor_generator, model_neuron, epochs=5, lr=5e-3, fixed_std=.01, optimizer=optim.LBFGS):
    optimizer = optimizer(gabor_generator.parameters(), lr=lr)
    for epoch in range(epochs):
        optimizer.zero_grad()
        gabor = gabor_generator()
        if fixed_std is not None:
            gabor_std = gabor.std()
            gabor_std_constrained = fixed_std * gabor / gabor_std
        loss = -model_neuron(gabor_std_constrained)
        loss.backward()

        def closure():
            return loss  # ROOT
        optimizer.step(closure)
    return gabor_generator


torch.manual_seed(0)
model_neuron = nn.Sequential(nn.Conv2d(1, 1, 5), nn.ELU(), nn.Flatten(), nn.Linear(144, 1))
for p in model_neuron.parameters():
    p.requires_grad_(False)
trainer_fn(GaborGenerator(), lambda img: model_neuron(img).sum())
