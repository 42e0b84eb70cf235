"""PINA's `SelfAdaptiveWeighting.weights_update` measures each condition's gradient norm by calling `loss.backward(retain_graph=True)` and reading `p.grad`, but `.backward()` adds into the parameters' `.grad`: from the second condition on, the norm read is the norm of the sum of every earlier condition's gradient, so the weights that balance the physics and boundary terms of the PINN loss are computed from contaminated gradients and training silently optimises a wrongly weighted loss.

source: https://github.com/PINA-org/PINA/issues/718
kind: bug
symptom: silent
verified: at the first step the weights are physics 1.266 / boundary 4.765 instead of 1.232 / 5.313 (the norm read for the physics condition includes the boundary gradient left in .grad); over 20 Adam steps the weighted loss rises from 44.9 to 53.8 while the look-alike's falls from 43.8 to 40.5
"""
import math

import torch
from torch import nn

torch.manual_seed(0)


class FeedForward(nn.Module):
    def __init__(self, input_dimensions=1, output_dimensions=1, layers=(16, 16)):
        super().__init__()
        sizes = [input_dimensions, *layers, output_dimensions]
        blocks = []
        for i in range(len(sizes) - 2):
            blocks += [nn.Linear(sizes[i], sizes[i + 1]), nn.Tanh()]
        blocks.append(nn.Linear(sizes[-2], sizes[-1]))
        self.model = nn.Sequential(*blocks)

    def forward(self, x):
        return self.model(x)


class WeightingInterface:
    def __init__(self, update_every_n_epochs=1):
        self.update_every_n_epochs = update_every_n_epochs
        self.solver = None
        self.last_saved_weights = None

    def weights_update(self, losses):
        raise NotImplementedError

    def aggregate(self, losses, epoch):
        if self.last_saved_weights is None or epoch % self.update_every_n_epochs == 0:
            self.last_saved_weights = self.weights_update(losses)
        return sum(self.last_saved_weights[c] * losses[c] for c in losses)


class SelfAdaptiveWeighting(WeightingInterface):
    """Equalises the gradient norms of the loss components (Wang et al., 2025)."""

    def weights_update(self, losses):
        losses_norm = {}
        for condition, loss in losses.items():
            loss.backward(retain_graph=True)  # ROOT
            grads = torch.cat(
                [p.grad.flatten() for p in self.solver.model.parameters() if p.requires_grad]
            )
            losses_norm[condition] = grads.norm()
        return {
            condition: sum(losses_norm.values()) / losses_norm[condition]
            for condition in losses
        }


class PINN:
    """Poisson problem u'' = -pi^2 sin(pi x) on [0, 1] with u(0) = u(1) = 0."""

    def __init__(self, model, weighting):
        self.model = model
        self.weighting = weighting
        weighting.solver = self

    def loss_phys(self, x):
        x = x.requires_grad_(True)
        u = self.model(x)
        du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
        return ((d2u + math.pi ** 2 * torch.sin(math.pi * x)) ** 2).mean()

    def loss_boundary(self, xb):
        return (self.model(xb) ** 2).mean()

    def training_step(self, batch, epoch):
        losses = {
            "boundary": self.loss_boundary(batch["boundary"]),
            "physics": self.loss_phys(batch["physics"]),
        }
        return self.weighting.aggregate(losses, epoch), losses


model = FeedForward()
solver = PINN(model, SelfAdaptiveWeighting(update_every_n_epochs=1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
batch = {"physics": torch.rand(64, 1), "boundary": torch.tensor([[0.0], [1.0]])}

for epoch in range(20):
    loss, parts = solver.training_step(batch, epoch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 5 == 0:
        w = solver.weighting.last_saved_weights
        print(f"epoch {epoch}: loss {loss.item():.4f} weights "
              f"physics {w['physics'].item():.3f} boundary {w['boundary'].item():.3f}")
