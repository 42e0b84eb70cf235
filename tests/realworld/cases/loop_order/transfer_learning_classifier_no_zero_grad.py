"""Transfer-learning notebook trains the new classifier without ever zeroing the gradients.

source: https://github.com/udacity/deep-learning-v2-pytorch/pull/160
kind: bug
symptom: silent
verified: model.classifier[-1].weight.grad keeps growing: it is the sum over every batch so far
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)
model = nn.Sequential()
model.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
for param in model.features.parameters():
    param.requires_grad = False
model.classifier = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.classifier.parameters(), lr=0.001)
train_loader = [(torch.randn(4, 3, 12, 12), torch.randint(0, 2, (4,))) for _ in range(4)]
for epoch in range(1, 3):
    train_loss = 0.0
    for batch_i, (data, target) in enumerate(train_loader):
        output = model(data)
        loss = criterion(output, target)
        loss.backward()  # ROOT
        optimizer.step()
        train_loss += loss.item()
    print(epoch, train_loss, model.classifier[-1].weight.grad.norm().item())
