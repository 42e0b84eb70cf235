import torch
import torch.nn as nn
from torch.func import functional_call, grad, vmap

model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def sample_loss(p, x, y):
    out = functional_call(model, p, (x.unsqueeze(0),))
    return nn.functional.cross_entropy(out, y.unsqueeze(0))


for _ in range(3):
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(10, 5), torch.randint(0, 2, (10,))
    per_grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
    for name, p in model.named_parameters():
        g = per_grads[name]
        norms = g.flatten(1).norm(dim=1).clamp(min=1.0)
        p.grad = (g / norms.view(-1, *[1] * (g.dim() - 1))).mean(0)
    opt.step()
    opt.zero_grad()
