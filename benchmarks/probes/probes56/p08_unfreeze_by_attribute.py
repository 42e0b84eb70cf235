"""Linear probing: freeze everything, then switch the classifier back on."""
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(10, 20), nn.ReLU())
        self.classifier = nn.Linear(20, 3)

    def forward(self, x):
        return self.classifier(self.features(x))


model = Net()
for p in model.parameters():
    p.requires_grad = False
model.classifier.requires_grad_ = True  # ROOT
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.SGD(trainable, lr=0.01)
for _ in range(2):
    loss = nn.functional.cross_entropy(model(torch.randn(4, 10)), torch.randint(0, 3, (4,)))
    opt.zero_grad()
    loss.backward()
    opt.step()
