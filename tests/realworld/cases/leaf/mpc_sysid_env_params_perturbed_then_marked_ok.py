"""System identification perturbs the true pendulum parameters first and marks the result requires_grad, a leaf RMSprop accepts.

source: https://github.com/locuslab/differentiable-mpc/issues/5
kind: lookalike
"""
import torch
from torch import optim


class PendulumDx:
    def __init__(self, params):
        self.params = params  # gravity, mass, length

    def __call__(self, th, dth, u, dt=0.05):
        g, m, l = torch.unbind(self.params)
        ddth = -3.0 * g / (2.0 * l) * torch.sin(th + torch.pi) + 3.0 * u / (m * l ** 2)
        return th + dt * dth, dth + dt * ddth


class IL_Exp:
    def __init__(self, learn_dx=True):
        self.true_params = torch.tensor([10.0, 1.0, 1.0])
        self.env_params = (self.true_params.clone() * 1.2).requires_grad_()
        self.learn_dx = learn_dx

    def run(self):
        params = [{'params': self.env_params, 'lr': 1e-2, 'alpha': 0.5}]
        opt = optim.RMSprop(params)
        true_dx, dx = PendulumDx(self.true_params), PendulumDx(self.env_params)
        th, dth, u = torch.rand(16), torch.rand(16), torch.randn(16)
        for it in range(5):
            nth_true, ndth_true = true_dx(th, dth, u)
            nth, ndth = dx(th, dth, u)
            loss = ((nth - nth_true) ** 2 + (ndth - ndth_true) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return loss.item()


exp = IL_Exp()
print(exp.run())
