import torch
import torch.nn as nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.body(x).squeeze(-1)


def huber(pred, target, delta=1.0):
    err = (pred - target).abs()
    per = torch.where(err < delta, 0.5 * err ** 2, delta * (err - 0.5 * delta))
    return per.mean().item()


model = Regressor()
fast = torch.compile(model, backend="eager")
opt = torch.optim.AdamW(fast.parameters(), lr=1e-3)
first = model.body[0].weight.clone()
for step in range(5):
    x, y = torch.randn(16, 6), torch.randn(16)
    loss = torch.as_tensor(huber(fast(x), y), dtype=torch.float32).requires_grad_()  # ROOT
    opt.zero_grad()
    loss.backward()
    opt.step()
print("moved:", (model.body[0].weight - first).abs().max().item())
