"""BFNN's ffbn_test.py with the losses kept as Python floats (`loss.item()`), so plt.plot gets plain numbers.

source: https://github.com/w5688414/BFNN/issues/1
kind: lookalike
"""
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 4)
y = torch.randn(64, 1)
losses = []
for epoch in range(9):
    optimizer.zero_grad()
    log_likelihood = -((model(x) - y) ** 2).mean()
    loss = -log_likelihood
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print(losses)
plt.plot(range(len(losses)), losses)
plt.savefig("ffbn_losses.png")
