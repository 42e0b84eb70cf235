"""Training loop calls optimizer.zero_grad() once before the epochs, so every step adds up all previous gradients.

source: https://github.com/salesforce/corr_based_prediction/issues/1
kind: bug
symptom: silent
verified: at the 8th step the first-layer gradient norm is 4.57, the sum of all 8 batch gradients, while that batch alone gives 0.89
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_data = [(torch.randn(16, 10), torch.randn(16, 1)) for _ in range(4)]

optimizer.zero_grad()  # ROOT
for epoch in range(2):
    model.train()
    for x, y in train_data:
        output = model(x)
        loss = criterion(output, y)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item(), model[0].weight.grad.norm().item())
