"""pytorch_optimizer's SophiaH estimates the Hessian diagonal with Hutchinson's method, differentiating the parameters' .grad a second time; the training loop (LM-RMT) calls loss.backward() without create_graph=True, so the gradients have no graph and the optimizer step fails.

source: https://github.com/kozistr/pytorch_optimizer/issues/193
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SophiaH(torch.optim.Optimizer):
    """pytorch_optimizer's SophiaH, cut down: Hutchinson Hessian-diagonal estimate every update_period steps."""

    def __init__(self, params, lr=6e-2, betas=(0.96, 0.99), weight_decay=0.0, p=1e-2, update_period=1,
                 num_samples=1, eps=1e-12):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay, p=p, eps=eps))
        self.update_period, self.num_samples = update_period, num_samples
        self._step = 0

    @torch.no_grad()
    def compute_hutchinson_hessian(self, num_samples=1):
        params = [p for group in self.param_groups for p in group['params'] if p.grad is not None]
        grads = [p.grad for p in params]
        for i in range(num_samples):
            zs = [torch.randint(0, 2, p.size(), dtype=p.dtype) * 2.0 - 1.0 for p in params]
            with torch.enable_grad():
                h_zs = torch.autograd.grad(grads, params, grad_outputs=zs, retain_graph=i < num_samples - 1)  # SYMPTOM
            for p, h_z, z in zip(params, h_zs, zs):
                self.state[p]['hessian'] = self.state[p].get('hessian', torch.zeros_like(p)) + h_z * z / num_samples

    @torch.no_grad()
    def step(self, closure=None):
        if self._step % self.update_period == 0:
            for group in self.param_groups:
                for p in group['params']:
                    self.state[p]['hessian'] = torch.zeros_like(p)
            self.compute_hutchinson_hessian(self.num_samples)
        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if 'momentum' not in state:
                    state['momentum'] = torch.zeros_like(p)
                    state['hessian_moment'] = torch.zeros_like(p)
                state['momentum'].mul_(beta1).add_(p.grad, alpha=1.0 - beta1)
                if self._step % self.update_period == 0:
                    state['hessian_moment'].mul_(beta2).add_(state['hessian'], alpha=1.0 - beta2)
                update = (state['momentum'] / (group['p'] * state['hessian_moment']).clamp(min=group['eps'])).clamp(-1.0, 1.0)
                p.add_(update, alpha=-group['lr'])
        self._step += 1


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
optimizer = SophiaH(model.parameters(), lr=6e-2, betas=(0.96, 0.99), p=0.01, weight_decay=1e-1)
for step in range(5):
    data, target = torch.randn(8, 16), torch.randint(0, 4, (8,))
    loss = F.cross_entropy(model(data), target)
    optimizer.zero_grad()
    loss.backward()  # ROOT
    optimizer.step()
print(step, loss.item())
