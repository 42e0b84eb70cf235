"""Hand-written SGD that rebinds the loop variable, so no parameter ever changes."""
import torch

torch.manual_seed(0)
X = torch.randn(64, 3)
true_w = torch.tensor([[1.5], [-2.0], [0.5]])
Y = X @ true_w + 0.1 * torch.randn(64, 1)

w = torch.zeros(3, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
params = [w, b]


def predict(x):
    return x @ w + b


for step in range(50):
    loss = ((predict(X) - Y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in params:
            p = p - 0.1 * p.grad  # ROOT
    for p in params:
        p.grad = None

print("w", w.view(-1).tolist())
