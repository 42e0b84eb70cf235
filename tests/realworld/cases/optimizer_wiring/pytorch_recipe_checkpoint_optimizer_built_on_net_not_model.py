"""PyTorch "saving and loading a general checkpoint" recipe: after `model = Net()` the optimizer is rebuilt from `net.parameters()` (the network that wrote the checkpoint), so resumed training steps `net` and never `model`.

source: https://github.com/pytorch/tutorials/issues/1430
kind: bug
symptom: silent
verified: model.fc1.weight is unchanged after the resumed training steps while net.fc1.weight moves
"""
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
net = Net()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
EPOCH, LOSS = 5, 0.4
PATH = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save({'epoch': EPOCH, 'model_state_dict': net.state_dict(),
            'optimizer_state_dict': optimizer.state_dict(), 'loss': LOSS}, PATH)

model = Net()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)  # ROOT
checkpoint = torch.load(PATH)
model.load_state_dict(checkpoint['model_state_dict'])
optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
epoch = checkpoint['epoch']
loss = checkpoint['loss']

model.train()
criterion = nn.CrossEntropyLoss()
for i in range(3):
    inputs, labels = torch.randn(4, 16), torch.randint(0, 10, (4,))
    optimizer.zero_grad()
    outputs = model(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
