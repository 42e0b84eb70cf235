"""System identification perturbs the true pendulum parameters after marking them requires_grad, then hands them to RMSprop.

source: https://github.com/locuslab/differentiable-mpc/issues/5
kind: bug
symptom: crash
verified: ValueError: can't optimize a non-leaf Tensor
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
        self.env_params = (self.true_params.clone().requires_grad_() * 1.2)  # ROOT
        self.learn_dx = learn_dx

    def run(self):
        params = [{'params': self.env_params, 'lr': 1e-2, 'alpha': 0.5}]
        opt = optim.RMSprop(params)  # SYMPTOM
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
