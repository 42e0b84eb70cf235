"""evaluate() calls model.eval() and training continues without model.train(): dropout stays off.

source: https://github.com/shubhamagarwal92/mmd/issues/14
kind: bug
symptom: silent
verified: after the first evaluate(), model.training is False for every later training batch
"""
import torch
import torch.nn as nn


class HRED(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 16)
        self.dropout = nn.Dropout(0.3)
        self.decoder = nn.Linear(16, 4)

    def forward(self, x):
        return self.decoder(self.dropout(torch.relu(self.encoder(x))))


def evaluate(model, val_data):
    model.eval()
    losses = []
    with torch.no_grad():
        for x, y in val_data:
            losses.append(nn.functional.cross_entropy(model(x), y).item())
    return sum(losses) / len(losses)


def train(model, optimizer, train_data, val_data, num_epochs=3):
    model.train()  # ROOT
    modes = []
    for epoch in range(num_epochs):
        for x, y in train_data:
            modes.append(model.training)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
        evaluate(model, val_data)
    return modes


torch.manual_seed(0)
model = HRED()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.randn(4, 8), torch.randint(0, 4, (4,)))] * 2
modes = train(model, optimizer, data, data)
print(modes)
