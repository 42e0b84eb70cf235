# %% [markdown]
# Logistic regression from scratch

# %%
import torch

torch.manual_seed(0)
X = torch.randn(64, 3)
y = (X.sum(1, keepdim=True) > 0).float()

# %%
W = torch.randn(3, 1, requires_grad=True) * 0.01  # ROOT
bias = torch.zeros(1, requires_grad=True)
lr = 0.5

# %%
for epoch in range(3):
    p = torch.sigmoid(X @ W + bias)
    loss = torch.nn.functional.binary_cross_entropy(p, y)
    loss.backward()
    with torch.no_grad():
        W -= lr * W.grad
        bias -= lr * bias.grad
        W.grad.zero_()
        bias.grad.zero_()
    print(epoch, loss.item())
