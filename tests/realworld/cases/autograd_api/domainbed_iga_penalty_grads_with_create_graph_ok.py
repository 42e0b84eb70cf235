"""DomainBed's IGA with the fix from the issue: both autograd.grad calls pass create_graph=True, so the environment and mean gradients stay differentiable, the penalty has a graph back to the network's parameters and its weight changes the update.

source: https://github.com/facebookresearch/DomainBed/issues/50
kind: lookalike
"""
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F


class IGA:
    def __init__(self, input_shape, num_classes, hparams):
        self.hparams = hparams
        self.network = nn.Sequential(nn.Linear(input_shape, 32), nn.ReLU(), nn.Linear(32, num_classes))
        self.optimizer = torch.optim.Adam(self.network.parameters(), lr=1e-3)

    def update(self, minibatches, unlabeled=None):
        total_loss = 0
        grads = []
        for i, (x, y) in enumerate(minibatches):
            logits = self.network(x)
            env_loss = F.cross_entropy(logits, y)
            total_loss += env_loss
            env_grad = autograd.grad(env_loss, self.network.parameters(), retain_graph=True, create_graph=True)
            grads.append(env_grad)
        mean_loss = total_loss / len(minibatches)
        mean_grad = autograd.grad(mean_loss, self.network.parameters(), retain_graph=True, create_graph=True)
        penalty_value = 0
        for grad in grads:
            for g, mean_g in zip(grad, mean_grad):
                penalty_value += (g - mean_g).pow(2).sum()
        self.optimizer.zero_grad()
        (mean_loss + self.hparams['penalty'] * penalty_value).backward()
        grad_snapshot = torch.cat([p.grad.flatten() for p in self.network.parameters()])
        self.optimizer.step()
        return {'loss': mean_loss.item(), 'penalty': penalty_value.item(),
                'penalty_requires_grad': penalty_value.requires_grad, 'grad': grad_snapshot}


def run(penalty, steps=8):
    torch.manual_seed(0)
    algorithm = IGA(8, 3, {'penalty': penalty})
    data = torch.Generator().manual_seed(1)
    first = None
    for step in range(steps):
        minibatches = [(torch.randn(16, 8, generator=data) + env, torch.randint(0, 3, (16,), generator=data))
                       for env in range(3)]
        out = algorithm.update(minibatches)
        first = first or out
    weights = torch.cat([p.detach().flatten() for p in algorithm.network.parameters()])
    return first, weights


first_1000, w_1000 = run(1000.0)
first_0, w_0 = run(0.0)
print("penalty", first_1000['penalty'], "requires_grad", first_1000['penalty_requires_grad'])
print("grad difference", (first_1000['grad'] - first_0['grad']).norm().item(),
      "weights difference", (w_1000 - w_0).norm().item())
