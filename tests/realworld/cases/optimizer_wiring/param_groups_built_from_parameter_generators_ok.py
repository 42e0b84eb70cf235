"""pytorch#51794: param groups given as {'params': model[i].parameters()} hold generators; the optimizer turns each into a list of the module's parameters when the group is added, so both layers are trained (the issue is about the caller's dicts being modified, not about missing parameters).

source: https://github.com/pytorch/pytorch/issues/51794
kind: lookalike
"""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.Linear(10, 10))
params = [{"params": model[0].parameters()}, {"params": model[1].parameters(), "lr": 0.001}]
a = torch.optim.SGD(params, lr=0.01)
before = [p.detach().clone() for p in model.parameters()]
for step in range(3):
    x, y = torch.randn(4, 10), torch.randn(4, 10)
    loss = torch.nn.functional.mse_loss(model(x), y)
    a.zero_grad()
    loss.backward()
    a.step()
print([len(g["params"]) for g in a.param_groups], [(p - b).abs().max().item() > 0 for p, b in zip(model.parameters(), before)])
