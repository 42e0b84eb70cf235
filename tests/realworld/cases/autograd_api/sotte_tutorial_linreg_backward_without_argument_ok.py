"""sotte/pytorch_tutorial's linear-regression train step after the fix of issue 5: loss.backward() seeds the scalar loss with 1, so the gradients are the MSE's own and SGD with lr=0.001 decreases the loss.

source: https://github.com/sotte/pytorch_tutorial/issues/5
kind: lookalike
"""
import torch
from torch import nn
from torch import optim


class LinReg(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.beta = nn.Linear(input_dim, 1)

    def forward(self, X):
        return self.beta(X)


torch.manual_seed(0)
n_samples, n_features = 100, 1
X = torch.randn(n_samples, n_features)
y = 40.0 * X + 10.0 * torch.randn(n_samples, n_features)  # stands for sklearn's make_regression(noise=10)

model = LinReg(n_features)
optimizer = optim.SGD(model.parameters(), lr=0.001)
criterion = nn.MSELoss()

for step in range(5):
    model.train()
    optimizer.zero_grad()
    y_ = model(X)
    loss = criterion(y_, y)
    true_grad = torch.autograd.grad(loss, model.beta.weight, retain_graph=True)[0]
    loss.backward()
    if step == 0:
        print("grad / true grad:", round((model.beta.weight.grad / true_grad).item(), 1), "MSE:", round(loss.item(), 1))
    optimizer.step()
    print("step", step, "MSE", round(loss.item(), 1))
