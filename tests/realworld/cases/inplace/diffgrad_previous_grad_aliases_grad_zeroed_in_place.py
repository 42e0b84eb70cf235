"""torch-optimizer's `DiffGrad.step` stores `state['previous_grad'] = grad`, where `grad` is `p.grad.data` itself; the training loop zeroes gradients in place (`zero_grad(set_to_none=False)`, what `zero_grad()` did in torch 1.4) and the next backward accumulates into the same tensor, so at every later step `previous_grad - grad` is exactly 0 and the friction coefficient is the constant 0.5: DiffGrad silently degrades to Adam with half the learning rate.

source: https://github.com/jettify/pytorch-optimizer/commit/473f91dd7b53f82b1f0be45251c59c30cced5634
kind: bug
symptom: silent
verified: from the second step on the stored previous gradient is the current gradient (max |previous_grad - grad| = 0.0000, so dfc = 0.5 everywhere); the look-alike's difference is 0.09-0.13
"""
import math

import torch
from torch import nn
from torch.optim.optimizer import Optimizer

torch.manual_seed(0)


class DiffGrad(Optimizer):
    """DiffGrad as before the commit (the deprecated positional `add_`/`addcmul_`/`addcdiv_` scalars written as keywords)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super(DiffGrad, self).__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p)
                    state['exp_avg_sq'] = torch.zeros_like(p)
                    state['previous_grad'] = torch.zeros_like(p)

                exp_avg, exp_avg_sq, previous_grad = (
                    state['exp_avg'],
                    state['exp_avg_sq'],
                    state['previous_grad'],
                )
                state['step'] += 1

                if group['weight_decay'] != 0:
                    grad.add_(p.data, alpha=group['weight_decay'])

                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.sqrt().add_(group['eps'])

                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']

                # compute diffgrad coefficient (dfc)
                diff = torch.abs(previous_grad - grad)
                dfc = torch.div(1.0, (1.0 + torch.exp(-diff)))
                state['previous_grad'] = grad  # ROOT

                exp_avg1 = exp_avg * dfc
                step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1
                p.data.addcdiv_(exp_avg1, denom, value=-step_size)

        return loss


model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = DiffGrad(model.parameters(), lr=1e-2)
x = torch.randn(128, 10)
y = (x[:, :3].sum(1, keepdim=True) > 0).float()
weight = model[0].weight

for step in range(5):
    optimizer.zero_grad(set_to_none=False)
    loss = nn.functional.binary_cross_entropy_with_logits(model(x[step::5] * 3), y[step::5])
    loss.backward()
    if step > 0:
        gap = (optimizer.state[weight]['previous_grad'] - weight.grad).abs().max().item()
        print(f"step {step}: loss {loss.item():.4f}  max |previous_grad - grad| {gap:.4f}")
    optimizer.step()
