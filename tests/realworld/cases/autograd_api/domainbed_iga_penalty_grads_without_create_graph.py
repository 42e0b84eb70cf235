"""DomainBed's IGA computes each environment's gradient and the mean gradient with autograd.grad(..., retain_graph=True) but without create_graph=True, so the gradients are constants, the penalty sum((g - mean_g)^2) built from them has no graph, and (mean_loss + penalty * penalty_value).backward() trains on the mean loss alone: the penalty weight has no effect.

source: https://github.com/facebookresearch/DomainBed/issues/50
kind: bug
symptom: silent
verified: on the first update penalty_value is 2.42 with requires_grad=False; the network's gradient with penalty 1000 equals the one with penalty 0 (0.0 apart) and so do the weights after 8 steps (0.0 apart); with create_graph=True (the issue's fix) the two gradients are 11940 apart (norm) and the weights end 0.085 apart
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
            env_grad = autograd.grad(env_loss, self.network.parameters(), retain_graph=True)  # ROOT
            grads.append(env_grad)
        mean_loss = total_loss / len(minibatches)
        mean_grad = autograd.grad(mean_loss, self.network.parameters(), retain_graph=True)
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
