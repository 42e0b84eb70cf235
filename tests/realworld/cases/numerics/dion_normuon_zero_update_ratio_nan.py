"""dion's NorMuon optimizer rescales the neuron-normalized update back to the norm of the orthogonalized update with `norm_U / norm_U_new`; a weight whose gradient is all zeros (here the input projection of a residual MLP block behind a zero-initialized output projection, as in GPT models) gives an all-zero update, the ratio is 0/0 = NaN, and the first step writes NaN into the weight: from step 2 on the loss is NaN, with no error.

source: https://github.com/microsoft/dion/pull/24
kind: bug
symptom: silent
verified: after the first step the input projection holds NaN (input projection finite: False) and the loss is nan from step 2 (step losses: [1.0908, nan, nan, nan]); the look-alike (denominator clamped at 1e-8) stays finite (True) and its loss falls (1.0908, 1.0564, 1.0223, 0.9888)
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


def zeropower_via_newtonschulz(grad, steps=5):
    """Approximate orthogonalization of a 2-D update (Muon's quintic iteration)."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = grad / (grad.norm() + 1e-7)
    transposed = x.size(0) > x.size(1)
    if transposed:
        x = x.T
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x.T if transposed else x


def normuon_normalization(update, second_moment, beta2=0.95, eps=1e-8):
    """Neuron-wise second-moment normalization, then rescale to the original norm."""
    second_moment.mul_(beta2).add_(update.pow(2).mean(dim=1, keepdim=True), alpha=1 - beta2)
    normalized = update / (second_moment.sqrt() + eps)
    norm_u = update.norm()
    norm_u_new = normalized.norm()
    ratio = norm_u / norm_u_new  # ROOT
    return normalized * ratio


class NorMuon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["momentum"] = torch.zeros_like(p)
                    state["second_moment"] = torch.zeros(p.size(0), 1)
                buf = state["momentum"]
                buf.mul_(group["momentum"]).add_(p.grad)
                update = zeropower_via_newtonschulz(buf)
                update = normuon_normalization(update, state["second_moment"])
                scale = max(1.0, p.size(0) / p.size(1)) ** 0.5
                p.add_(update, alpha=-group["lr"] * scale)


class Block(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.c_fc = nn.Linear(dim, hidden, bias=False)
        self.c_proj = nn.Linear(hidden, dim, bias=False)
        nn.init.zeros_(self.c_proj.weight)  # zero-init output projection (GPT style)

    def forward(self, x):
        return x + self.c_proj(torch.relu(self.c_fc(x)))


class TinyModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.block = Block(dim)
        self.head = nn.Linear(dim, 1, bias=False)

    def forward(self, x):
        return self.head(self.block(x)).squeeze(-1)


def main():
    model = TinyModel()
    opt = NorMuon(model.parameters(), lr=0.02)
    x = torch.randn(64, 16)
    y = x[:, :4].sum(dim=1).tanh()
    losses = []
    for _ in range(4):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(round(loss.item(), 4))
    print("step losses:", losses)
    print("input projection finite:", bool(torch.isfinite(model.block.c_fc.weight).all()))


if __name__ == "__main__":
    main()
