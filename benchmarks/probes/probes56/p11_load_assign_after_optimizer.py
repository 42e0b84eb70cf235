"""Warm start from a checkpoint with the memory-saving assign=True load."""
import io
import torch
import torch.nn as nn


def make_model():
    return nn.Sequential(nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 2))


buf = io.BytesIO()
torch.save(make_model().state_dict(), buf)
buf.seek(0)

model = make_model()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
state = torch.load(buf, weights_only=True)
model.load_state_dict(state, assign=True)  # ROOT
before = model[0].weight.detach().clone()
for _ in range(3):
    loss = nn.functional.cross_entropy(model(torch.randn(4, 5)), torch.randint(0, 2, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("moved", (model[0].weight - before).abs().max().item())
