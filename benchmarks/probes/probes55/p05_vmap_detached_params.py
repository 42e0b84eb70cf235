import torch
import torch.nn as nn
from torch.func import functional_call, vmap


model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
params = {k: v.detach() for k, v in model.named_parameters()}  # ROOT
buffers = {k: v.detach() for k, v in model.named_buffers()}
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def sample_loss(p, b, x, y):
    out = functional_call(model, (p, b), (x.unsqueeze(0),))
    return nn.functional.cross_entropy(out, y.unsqueeze(0))


x, y = torch.randn(10, 5), torch.randint(0, 2, (10,))
per_sample = vmap(sample_loss, in_dims=(None, None, 0, 0))(params, buffers, x, y)
weights = torch.softmax(-per_sample.detach(), 0)
loss = (weights * per_sample).sum()
opt.zero_grad()
loss.backward()
opt.step()
