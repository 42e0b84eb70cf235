"""Two classifiers: net2 is pretrained and its loss is meant to train net1 (loss1 = loss1 + loss2), but after both backward calls the loop steps optimizer2, so the pretrained net2 is updated and net1, which received the gradients, never changes.

source: https://discuss.pytorch.org/t/what-does-the-backward-function-do/9944
kind: bug
symptom: silent
verified: after 3 iterations net1's weights have gradients but are identical to their initial values, while the pretrained net2 has moved
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
net1 = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 10))
net2 = nn.Sequential(nn.Linear(10, 3))  # pretrained classifier
optimizer1 = torch.optim.SGD(net1.parameters(), lr=0.1)
optimizer2 = torch.optim.SGD(net2.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
net1_before = [p.detach().clone() for p in net1.parameters()]
net2_before = [p.detach().clone() for p in net2.parameters()]

for it in range(3):
    x = torch.randn(8, 10)
    y1, y2 = torch.randint(0, 10, (8,)), torch.randint(0, 3, (8,))
    optimizer1.zero_grad()
    optimizer2.zero_grad()
    features = net1(x)
    loss1 = criterion(features, y1)
    loss2 = criterion(net2(features), y2)
    loss1 = loss1 + loss2
    loss1.backward(retain_graph=True)
    loss2.backward()
    optimizer2.step()  # ROOT

print(all(torch.equal(a, b) for a, b in zip(net1_before, net1.parameters())),
      any(not torch.equal(a, b) for a, b in zip(net2_before, net2.parameters())))
