"""Source-separation tutorial, "Signs of healthy training", after the fix: the losses are stored as Python floats before they are plotted.

source: https://github.com/source-separation/tutorial/issues/28
kind: lookalike
"""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

torch.manual_seed(0)
LEARNING_RATES = [1e-3, 1e-2, 1e-1]
N_ITERATIONS = 20
x = torch.randn(64, 8)
y = x @ torch.randn(8, 1) + 0.1 * torch.randn(64, 1)

grad_norms = [[] for _ in LEARNING_RATES]
losses = [[] for _ in LEARNING_RATES]
for j, lr in enumerate(LEARNING_RATES):
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for i in range(N_ITERATIONS):
        optimizer.zero_grad()
        loss = torch.nn.functional.l1_loss(model(x), y)
        loss.backward()
        grad_norm = sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
        grad_norms[j].append(grad_norm.item())
        losses[j].append(loss.item())
        optimizer.step()

fig, ax = plt.subplots(1, 2, figsize=(15, 5))
for j, lr in enumerate(LEARNING_RATES):
    ax[0].plot(grad_norms[j], label=f'Learning rate: {lr}')
    ax[0].set_title('Gradient norm for each learning rate')
for j, lr in enumerate(LEARNING_RATES):
    ax[1].plot(np.log10(losses[j]), label=f'Learning rate: {lr}')
    ax[1].set_title('Loss for each learning rate')
plt.close(fig)
