"""ART's ProjectedGradientDescentPyTorch in PR #2382 after its commit 12e13472: the Lp normalization uses out-of-place `flat.abs()`, so the reshaped view does not overwrite the loss gradient and `grad.sign()` restores each step's direction.

source: https://github.com/Trusted-AI/adversarial-robustness-toolbox/pull/2382
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn


class PyTorchClassifier:
    def __init__(self, model, loss, clip_values=(0.0, 1.0)):
        self.model = model
        self.loss = loss
        self.clip_values = clip_values

    def loss_gradient(self, x, y):
        x_grad = x.clone().detach().requires_grad_(True)
        loss = self.loss(self.model(x_grad), y)
        self.model.zero_grad()
        loss.backward()
        return x_grad.grad


class ProjectedGradientDescentPyTorch:
    def __init__(self, estimator, norm=2, eps=1.0, eps_step=0.1, max_iter=10, targeted=False):
        self.estimator = estimator
        self.norm = norm
        self.eps = eps
        self.eps_step = eps_step
        self.max_iter = max_iter
        self.targeted = targeted

    def _compute_perturbation_pytorch(self, x, y):
        # Get gradient wrt loss; invert it if attack is targeted
        grad = self.estimator.loss_gradient(x=x, y=y) * (-1 if self.targeted else 1)

        # Apply norm bound
        flat = grad.reshape(len(grad), -1)
        if self.norm in [np.inf, "inf"]:
            flat = torch.ones_like(flat)
        elif self.norm > 1:
            q = self.norm / (self.norm - 1)
            q_norm = torch.linalg.norm(flat, ord=q, dim=1, keepdim=True)
            flat = (flat.abs() * q_norm.where(q_norm == 0, 1 / q_norm)) ** (q - 1)

        grad = flat.reshape(grad.shape) * grad.sign()
        return grad

    def _projection(self, values):
        flat = values.reshape(len(values), -1)
        norms = torch.linalg.norm(flat, ord=2, dim=1, keepdim=True)
        factor = torch.clamp(self.eps / (norms + 1e-12), max=1.0)
        return (flat * factor).reshape(values.shape)

    def generate(self, x, y):
        x_adv = x.clone()
        perturbations = []
        for _ in range(self.max_iter):
            perturbation = self._compute_perturbation_pytorch(x_adv, y)
            perturbations.append(perturbation)
            x_adv = x_adv + self.eps_step * perturbation
            x_adv = x + self._projection(x_adv - x)
            x_adv = torch.clamp(x_adv, *self.estimator.clip_values)
        return x_adv, torch.stack(perturbations)


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))
classifier = PyTorchClassifier(model, nn.CrossEntropyLoss())
x = torch.rand(16, 3, 8, 8)
y = model(x).argmax(dim=1)
attack = ProjectedGradientDescentPyTorch(classifier, norm=2, eps=1.0, eps_step=0.2, max_iter=10)
x_adv, perturbations = attack.generate(x, y)
with torch.no_grad():
    clean_loss = nn.functional.cross_entropy(model(x), y).item()
    adv_loss = nn.functional.cross_entropy(model(x_adv), y).item()
print(f"loss clean {clean_loss:.4f} -> adversarial {adv_loss:.4f}")
print(f"fraction of negative perturbation entries: {(perturbations < 0).float().mean().item():.3f}")
