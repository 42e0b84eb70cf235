"""HeavyBall's PrecondSchedulePaLMForeachSOAP.step is decorated with @torch.no_grad() and calls the closure directly, so when training goes through optimizer.step(closure) (as Lightning does) the closure's forward runs without grad mode and its loss.backward() fails.

source: https://github.com/HomebrewML/HeavyBall/issues/10
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class PrecondSchedulePaLMForeachSOAP(torch.optim.Optimizer):
    """Cut down to the step structure: an Adam-style update stands in for the SOAP preconditioner."""

    def __init__(self, params, lr=3e-3, betas=(0.9, 0.95), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None:
            loss = None
        else:
            loss = closure()  # ROOT
        for group in self.param_groups:
            beta1, beta2 = group['betas']
            for p in group['params']:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p)
                    state['exp_avg_sq'] = torch.zeros_like(p)
                state['step'] += 1
                state['exp_avg'].lerp_(p.grad, 1 - beta1)
                state['exp_avg_sq'].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (state['exp_avg_sq'] / (1 - beta2 ** state['step'])).sqrt_().add_(group['eps'])
                p.addcdiv_(state['exp_avg'] / (1 - beta1 ** state['step']), denom, value=-group['lr'])
        return loss


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = PrecondSchedulePaLMForeachSOAP(model.parameters())
x, y = torch.randn(32, 8), torch.randn(32, 1)


def closure():
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()  # SYMPTOM
    return loss


for step in range(5):
    loss = optimizer.step(closure)
print(step, loss.item())
