"""ml-basics penguin classifier after the fix: PenguinNet.forward returns the fc3 logits and nn.CrossEntropyLoss applies the log-softmax.

source: https://github.com/MicrosoftDocs/ml-basics/issues/48
kind: lookalike
verified: after 300 Adam steps the training loss is 0.0001
"""
import torch
import torch.nn as nn

features = ['CulmenLength', 'CulmenDepth', 'FlipperLength', 'BodyMass']
penguin_classes = ['Adelie', 'Gentoo', 'Chinstrap']
hl = 10


class PenguinNet(nn.Module):
    def __init__(self):
        super(PenguinNet, self).__init__()
        self.fc1 = nn.Linear(len(features), hl)
        self.fc2 = nn.Linear(hl, hl)
        self.fc3 = nn.Linear(hl, len(penguin_classes))

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def train(model, data_loader, optimizer):
    model.train()
    train_loss = 0
    for data, target in data_loader:
        optimizer.zero_grad()
        out = model(data)
        loss = loss_criteria(out, target)
        train_loss += loss.item()
        loss.backward()
        optimizer.step()
    return train_loss / len(data_loader)


torch.manual_seed(0)
centers = torch.randn(3, 4) * 3
y = torch.randint(0, 3, (96,))
x = centers[y] + 0.3 * torch.randn(96, 4)
train_loader = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 96, 32)]
model = PenguinNet()
loss_criteria = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(100):
    loss = train(model, train_loader, optimizer)
print(loss)
