"""AdaBelief's `step` builds the denominator with `exp_avg_var.add_(group['eps']).sqrt()`: the in-place `add_` writes eps into the optimizer's running variance state on every step, so the state the next step decays and reuses carries an extra eps/(1 - beta2) floor (1000 * eps with beta2 = 0.999). With eps = 1e-8 and a loss whose gradients are small (a mean over many terms, scaled by 1e-3), that floor dwarfs the belief term, the denominator no longer tracks the gradients' spread and the updates shrink: the model trains far slower than AdaBelief's scale-invariant update promises, with no error.

source: https://github.com/juntang-zhuang/Adabelief-Optimizer/commit/fdd95ed122f7a727af870551ce17b7e4ade95831
kind: bug
symptom: silent
verified: the variance state exceeds the EMA of the squared gradient residuals it should hold by 2.59e-06 (eps accumulated over 300 steps), and the regression's final loss is 0.2841 with the small-gradient loss against 0.0022 unscaled; the look-alike's state matches the EMA (excess about 1e-16) and both losses end at 0.0022
"""
import math

import torch
from torch import nn
from torch.optim.optimizer import Optimizer

torch.manual_seed(0)


class AdaBelief(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16, weight_decay=0, amsgrad=False,
                 weight_decouple=True, fixed_decay=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)
        super().__init__(params, defaults)
        self.weight_decouple = weight_decouple
        self.fixed_decay = fixed_decay

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                amsgrad = group["amsgrad"]
                state = self.state[p]
                beta1, beta2 = group["betas"]

                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p.data, memory_format=torch.preserve_format)
                    state["exp_avg_var"] = torch.zeros_like(p.data, memory_format=torch.preserve_format)
                    if amsgrad:
                        state["max_exp_avg_var"] = torch.zeros_like(p.data, memory_format=torch.preserve_format)

                exp_avg, exp_avg_var = state["exp_avg"], state["exp_avg_var"]

                state["step"] += 1
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]

                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                grad_residual = grad - exp_avg
                exp_avg_var.mul_(beta2).addcmul_(grad_residual, grad_residual, value=1 - beta2)

                if amsgrad:
                    max_exp_avg_var = state["max_exp_avg_var"]
                    torch.max(max_exp_avg_var, exp_avg_var, out=max_exp_avg_var)
                    denom = (max_exp_avg_var.add_(group["eps"]).sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                else:
                    denom = (exp_avg_var.add_(group["eps"]).sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])  # ROOT

                if self.weight_decouple:
                    if not self.fixed_decay:
                        p.data.mul_(1.0 - group["lr"] * group["weight_decay"])
                    else:
                        p.data.mul_(1.0 - group["weight_decay"])
                elif group["weight_decay"] != 0:
                    grad.add_(p.data, alpha=group["weight_decay"])

                step_size = group["lr"] / bias_correction1
                p.data.addcdiv_(exp_avg, denom, value=-step_size)

        return loss


x = torch.randn(256, 16)
y = x @ torch.randn(16, 1) + 0.05 * torch.randn(256, 1)
init = nn.Linear(16, 1)


def train(loss_scale, steps=300, eps=1e-8):
    model = nn.Linear(16, 1)
    model.load_state_dict(init.state_dict())
    opt = AdaBelief(model.parameters(), lr=1e-2, eps=eps)
    beta1, beta2 = opt.param_groups[0]["betas"]
    m = torch.zeros_like(model.weight)
    s = torch.zeros_like(model.weight)  # EMA of the squared residuals, kept outside the optimizer (measurement only)
    for step in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y) * loss_scale
        loss.backward()
        g = model.weight.grad.detach()
        m = beta1 * m + (1 - beta1) * g
        s = beta2 * s + (1 - beta2) * (g - m) ** 2
        opt.step()
    excess = (opt.state[model.weight]["exp_avg_var"] - s).mean().item()
    with torch.no_grad():
        final = nn.functional.mse_loss(model(x), y).item()
    return excess, final


excess_small, loss_small = train(1e-3)
_, loss_unit = train(1.0)
print(f"variance state minus the EMA of squared residuals: {excess_small:.3g}")
print(f"final loss after 300 steps: small-gradient loss {loss_small:.4f}, unscaled loss {loss_unit:.4f}")
