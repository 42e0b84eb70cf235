"""PyTorch course, linear regression V2: the SGD optimizer is given model_0's parameters while the loop trains model_1, so model_1's loss never moves.

source: https://github.com/mrdbourke/pytorch-deep-learning/issues/399
kind: bug
symptom: silent
verified: over 100 epochs model_1's loss stays at 0.5552 (the same at every printed epoch); with params=model_1.parameters() it falls to 0.0066
"""
import torch
from torch import nn


class LinearRegressionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.weights = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)
        self.bias = nn.Parameter(torch.randn(1, dtype=torch.float), requires_grad=True)

    def forward(self, x):
        return self.weights * x + self.bias


class LinearRegressionModel2(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear_layer = nn.Linear(in_features=1, out_features=1)

    def forward(self, x):
        return self.linear_layer(x)


weight, bias = 0.7, 0.3
X = torch.arange(0, 1, 0.02).unsqueeze(dim=1)
y = weight * X + bias
train_split = int(0.8 * len(X))
X_train, y_train = X[:train_split], y[:train_split]

torch.manual_seed(42)
model_0 = LinearRegressionModel()
torch.manual_seed(42)
model_1 = LinearRegressionModel2()
loss_fn = nn.L1Loss()
optimizer = torch.optim.SGD(params=model_0.parameters(), lr=0.01)  # ROOT

torch.manual_seed(42)
epochs = 100
for epoch in range(epochs):
    model_1.train()
    y_pred = model_1(X_train)
    loss = loss_fn(y_pred, y_train)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if epoch % 20 == 0:
        print(epoch, round(loss.item(), 4))
print(round(loss.item(), 4))
