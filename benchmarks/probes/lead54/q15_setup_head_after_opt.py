import torch
import torch.nn as nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
        self.fc = nn.Linear(32, 1000)

    def forward(self, x):
        return self.fc(self.features(x))


def adapt_head(net, num_classes):
    net.fc = nn.Linear(net.fc.in_features, num_classes)  # ROOT
    return net


def build(num_classes, lr):
    net = Backbone()
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    net = adapt_head(net, num_classes)  # ROOT (the call; added after first contact, see lead54.md)
    return net, opt


net, opt = build(5, 0.05)
w0 = net.fc.weight.clone()
for _ in range(3):
    x, y = torch.randn(8, 12), torch.randint(0, 5, (8,))
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("new head moved:", not torch.equal(w0, net.fc.weight))
