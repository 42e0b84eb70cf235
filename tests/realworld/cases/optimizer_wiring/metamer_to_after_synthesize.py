"""Metamer.to() replaces the metamer tensor after synthesize() built its optimizer: synthesis stalls.

source: https://github.com/plenoptic-org/plenoptic/issues/404
kind: bug
symptom: silent
verified: met.metamer stops changing after met.to(torch.float64); the loss stays the same
"""
import torch
import torch.nn as nn


class Metamer:
    def __init__(self, image, model):
        self.image = image
        self.model = model
        self.target_representation = model(image).detach()
        self.metamer = torch.rand_like(image).requires_grad_()
        self.optimizer = None
        self.losses = []

    def synthesize(self, max_iter=5):
        if self.optimizer is None:
            self.optimizer = torch.optim.Adam([self.metamer], lr=0.01)
        for _ in range(max_iter):
            self.optimizer.zero_grad()
            loss = ((self.model(self.metamer) - self.target_representation) ** 2).mean()
            loss.backward()
            self.optimizer.step()
            self.losses.append(loss.item())

    def to(self, *args, **kwargs):
        self.image = self.image.to(*args, **kwargs)
        self.target_representation = self.target_representation.to(*args, **kwargs)
        self.model = self.model.to(*args, **kwargs)
        self.metamer = self.metamer.detach().to(*args, **kwargs).requires_grad_()  # ROOT
        return self


torch.manual_seed(0)
met = Metamer(torch.rand(1, 1, 8, 8), nn.Conv2d(1, 2, 3))
met.synthesize(5)
met.to(torch.float64)
before = met.metamer.detach().clone()
met.synthesize(5)
print(torch.equal(before, met.metamer.detach()), met.losses[-3:])
