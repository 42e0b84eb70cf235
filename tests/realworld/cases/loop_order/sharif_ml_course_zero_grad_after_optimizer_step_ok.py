"""The Sharif Introduction_to_Machine_Learning notebook calls optimizer.zero_grad() right after optimizer.step(); the issue calls that order wrong, but the gradients are cleared before the next backward, so each step uses only its own batch.

source: https://github.com/SharifiZarchi/Introduction_to_Machine_Learning/issues/55
kind: lookalike
verified: the gradient each step uses equals that batch's own gradient (torch.autograd.grad on the same batch, difference 0.0)
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
train_loader = [(torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))) for _ in range(5)]
for epoch in range(2):
    model.train()
    running_loss = 0.0
    for images, labels in train_loader:
        outputs = model(images)
        loss = criterion(outputs, labels)
        own = torch.autograd.grad(loss, list(model.parameters()), retain_graph=True)
        loss.backward()
        assert all(torch.allclose(p.grad, g) for p, g in zip(model.parameters(), own))
        optimizer.step()
        optimizer.zero_grad()
        running_loss += loss.item()
