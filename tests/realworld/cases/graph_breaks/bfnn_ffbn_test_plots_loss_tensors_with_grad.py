"""BFNN's ffbn_test.py keeps each loss as the tensor itself (grad_fn=NegBackward0) in a list and hands the list to plt.plot, which converts it with numpy and fails on tensors that require grad.

source: https://github.com/w5688414/BFNN/issues/1
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.
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
    losses.append(loss)  # ROOT
print(losses)
plt.plot(range(len(losses)), losses)  # SYMPTOM
plt.savefig("ffbn_losses.png")
