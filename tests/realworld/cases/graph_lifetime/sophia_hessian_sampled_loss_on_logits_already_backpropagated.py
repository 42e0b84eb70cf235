"""SophiaG training: the Hessian update builds loss_sampled from the same logits whose graph loss.backward() already freed.

source: https://github.com/Liuhong99/Sophia/issues/1
kind: bug
symptom: crash
verified: RuntimeError: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SophiaG(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.965, 0.99), rho=0.04):
        super().__init__(params, dict(lr=lr, betas=betas, rho=rho))

    @torch.no_grad()
    def update_hessian(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                state.setdefault('hessian', torch.zeros_like(p))
                state['hessian'].mul_(group['betas'][1]).addcmul_(p.grad, p.grad, value=1 - group['betas'][1])

    @torch.no_grad()
    def step(self, bs=64):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                state.setdefault('exp_avg', torch.zeros_like(p))
                state.setdefault('hessian', torch.zeros_like(p))
                state['exp_avg'].mul_(group['betas'][0]).add_(p.grad, alpha=1 - group['betas'][0])
                ratio = (state['exp_avg'].abs() / (group['rho'] * bs * state['hessian'] + 1e-15)).clamp(None, 1)
                p.addcmul_(state['exp_avg'].sign(), ratio, value=-group['lr'])


torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 50))
optimizer = SophiaG(model.parameters(), lr=2e-4)
k = 2
for iter_num in range(4):
    X, Y = torch.randint(0, 50, (4, 8)), torch.randint(0, 50, (4, 8))
    logits = model(X)
    loss = F.cross_entropy(logits.view(-1, 50), Y.view(-1))
    loss.backward()
    optimizer.step(bs=32)
    optimizer.zero_grad(set_to_none=True)
    if iter_num % k == k - 1:
        samp_dist = torch.distributions.Categorical(logits=logits)
        y_sample = samp_dist.sample()
        loss_sampled = F.cross_entropy(logits.view(-1, 50), y_sample.view(-1), ignore_index=-1)  # ROOT
        loss_sampled.backward()  # SYMPTOM
        optimizer.update_hessian()
        optimizer.zero_grad(set_to_none=True)
