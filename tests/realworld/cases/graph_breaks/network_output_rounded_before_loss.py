"""A regressor whose output is rounded to whole numbers inside forward (the targets are integer counts): torch.round is a step function whose derivative is zero almost everywhere, so the loss gives every weight a zero gradient and the network never learns.

source: https://discuss.pytorch.org/t/torch-round-gradient/28628
kind: bug
symptom: silent
verified: every weight gradient is exactly zero and the weights are identical after 20 SGD steps while the loss stays constant
"""
import torch
import torch.nn as nn


class CountNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x):
        out = self.fc2(torch.relu(self.fc1(x)))
        return torch.round(out)  # ROOT


torch.manual_seed(0)
model = CountNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 6)
y = torch.randint(0, 5, (32, 1)).float()
before = [p.detach().clone() for p in model.parameters()]
for step in range(20):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item(), all((p.grad == 0).all() for p in model.parameters()),
      all(torch.equal(a, b) for a, b in zip(before, model.parameters())))
