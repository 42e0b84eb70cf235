"""torchdiffeq's `odeint_adjoint` after the fix of issue #118 (commit 1f27140): parameters that do not require grad are filtered out of `adjoint_params`, so the adjoint backward asks `torch.autograd.grad` only for tensors in the graph and a dynamics module with a frozen layer trains its other layers.

source: https://github.com/rtqichen/torchdiffeq/issues/118
kind: lookalike
"""
import torch
import torch.nn as nn


def odeint(func, y0, t, steps_per_interval=4):
    """Fixed-step Euler solver; returns the state at every time in t (stacked on dim 0)."""
    ys = [y0]
    y = y0
    for i in range(len(t) - 1):
        dt = (t[i + 1] - t[i]) / steps_per_interval
        tt = t[i]
        for _ in range(steps_per_interval):
            y = tuple(y_ + dt * f_ for y_, f_ in zip(y, func(tt, y))) if isinstance(y, tuple) else y + dt * func(tt, y)
            tt = tt + dt
        ys.append(y)
    if isinstance(y0, tuple):
        return ys
    return torch.stack(ys)


class OdeintAdjointMethod(torch.autograd.Function):
    @staticmethod
    def forward(ctx, func, y0, t, *adjoint_params):
        ctx.func = func
        with torch.no_grad():
            y = odeint(func, y0, t)
        ctx.save_for_backward(t, y, *adjoint_params)
        return y

    @staticmethod
    def backward(ctx, grad_y):
        with torch.no_grad():
            func = ctx.func
            t, y, *adjoint_params = ctx.saved_tensors
            adjoint_params = tuple(adjoint_params)
            aug_state = (y[-1], grad_y[-1], *[torch.zeros_like(p) for p in adjoint_params])

            def augmented_dynamics(t, y_aug):
                y, adj_y = y_aug[0], y_aug[1]
                with torch.enable_grad():
                    y = y.detach().requires_grad_(True)
                    func_eval = func(t, y)
                    vjp_y, *vjp_params = torch.autograd.grad(
                        func_eval, (y,) + adjoint_params, -adj_y, allow_unused=True, retain_graph=True)
                vjp_y = torch.zeros_like(y) if vjp_y is None else vjp_y
                vjp_params = [torch.zeros_like(p) if v is None else v for p, v in zip(adjoint_params, vjp_params)]
                return (func_eval, vjp_y, *vjp_params)

            for i in range(len(t) - 1, 0, -1):
                aug_state = odeint(augmented_dynamics, aug_state, t[i - 1:i + 1].flip(0))[-1]
                aug_state = (y[i - 1], aug_state[1] + grad_y[i - 1], *aug_state[2:])
            adj_y, adj_params = aug_state[1], aug_state[2:]
        return (None, adj_y, None, *adj_params)


def odeint_adjoint(func, y0, t, adjoint_params=None):
    if adjoint_params is None:
        adjoint_params = tuple(func.parameters())
    else:
        adjoint_params = tuple(adjoint_params)

    # Filter params that don't require gradients.
    adjoint_params = tuple(p for p in adjoint_params if p.requires_grad)
    return OdeintAdjointMethod.apply(func, y0, t, *adjoint_params)


class ODEFunc(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(2, 16)  # pretrained, kept fixed
        self.out = nn.Linear(16, 2)

    def forward(self, t, y):
        return self.out(torch.tanh(self.embed(y)))


torch.manual_seed(0)
func = ODEFunc()
func.embed.requires_grad_(False)
optimizer = torch.optim.Adam([p for p in func.parameters() if p.requires_grad], lr=0.01)
t = torch.linspace(0.0, 1.0, 5)
y0 = torch.randn(8, 2)
target = y0.flip(-1)
for step in range(5):
    optimizer.zero_grad()
    pred = odeint_adjoint(func, y0, t)
    loss = ((pred[-1] - target) ** 2).mean()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
