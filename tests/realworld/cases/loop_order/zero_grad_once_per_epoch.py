"""zero_grad() is called at the beginning of each epoch instead of each iteration.

source: https://github.com/pytorch/pytorch/issues/47175
kind: bug
symptom: silent
verified: net.fc2.weight.grad at the end of an epoch is the sum of all its batches' gradients
"""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


torch.manual_seed(0)
net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
inputs, labels = torch.randn(16, 10), torch.randint(0, 2, (16,))
trainloader = [(inputs[i:i + 4], labels[i:i + 4]) for i in range(0, 16, 4)]
for epoch in range(2):
    optimizer.zero_grad()  # ROOT
    for i, (x, y) in enumerate(trainloader):
        outputs = net(x)
        loss = criterion(outputs, y)
        loss.backward()
        optimizer.step()
