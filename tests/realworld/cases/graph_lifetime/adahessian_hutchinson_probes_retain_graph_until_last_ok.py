"""AdaHessian (davda54/ada-hessian) after its fix: `set_hessian` draws `n_samples=2` Hutchinson probes and keeps the double-backward graph of `loss.backward(create_graph=True)` alive for every probe but the last (`retain_graph=i < self.n_samples - 1`), so each step estimates diag(H) from both probes and training proceeds.

source: https://github.com/davda54/ada-hessian/commit/61b4fae1ed1a2dacbdf8620ac8744052cb81ad81
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)


class AdaHessian(torch.optim.Optimizer):
    """Second-order optimizer: Adam-like moments of the gradient and of a Hutchinson estimate of diag(H)."""

    def __init__(self, params, lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, hessian_power=1.0,
                 update_each=1, n_samples=1):
        self.n_samples = n_samples
        self.update_each = update_each
        self.generator = torch.Generator().manual_seed(2147483647)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, hessian_power=hessian_power)
        super().__init__(params, defaults)
        for p in self.get_params():
            p.hess = 0.0
            self.state[p]["hessian step"] = 0

    def get_params(self):
        return (p for group in self.param_groups for p in group["params"] if p.requires_grad)

    def zero_hessian(self):
        for p in self.get_params():
            if not isinstance(p.hess, float) and self.state[p]["hessian step"] % self.update_each == 0:
                p.hess.zero_()

    @torch.no_grad()
    def set_hessian(self):
        params = []
        for p in filter(lambda q: q.grad is not None, self.get_params()):
            if self.state[p]["hessian step"] % self.update_each == 0:
                params.append(p)
            self.state[p]["hessian step"] += 1
        if not params:
            return
        grads = [p.grad for p in params]
        for i in range(self.n_samples):
            zs = [torch.randint(0, 2, p.size(), generator=self.generator) * 2.0 - 1.0 for p in params]
            h_zs = torch.autograd.grad(grads, params, grad_outputs=zs, only_inputs=True, retain_graph=i < self.n_samples - 1)
            for h_z, z, p in zip(h_zs, zs, params):
                p.hess += h_z * z / self.n_samples

    @torch.no_grad()
    def step(self, closure=None):
        self.zero_hessian()
        self.set_hessian()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.mul_(1 - group["lr"] * group["weight_decay"])
                state = self.state[p]
                if len(state) == 1:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_hessian_diag_sq"] = torch.zeros_like(p)
                exp_avg, exp_hess = state["exp_avg"], state["exp_hessian_diag_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_hess.mul_(beta2).addcmul_(p.hess, p.hess, value=1 - beta2)
                bc1 = 1 - beta1 ** state["step"]
                bc2 = 1 - beta2 ** state["step"]
                denom = (exp_hess / bc2).pow_(group["hessian_power"] / 2).add_(group["eps"])
                p.addcdiv_(exp_avg, denom, value=-group["lr"] / bc1)
        return None


model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = AdaHessian(model.parameters(), lr=0.05, n_samples=2)
x = torch.randn(128, 8)
y = torch.sin(x.sum(1, keepdim=True))

for step in range(20):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward(create_graph=True)
    optimizer.step()
    if step % 5 == 0:
        print(f"step {step} loss {loss.item():.4f}")
