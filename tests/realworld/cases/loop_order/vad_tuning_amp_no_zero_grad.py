"""Silero VAD tuning loop (with a GradScaler) never calls optimizer.zero_grad() before loss.backward().

source: https://github.com/snakers4/silero-vad/pull/699
kind: bug
symptom: silent
verified: model.head.weight.grad holds the gradients of every batch added together
"""
import torch
import torch.nn as nn


class VADModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv1d(1, 8, 5, padding=2)
        self.head = nn.Linear(8, 1)

    def forward(self, wav):
        return torch.sigmoid(self.head(torch.relu(self.encoder(wav)).mean(-1))).squeeze(-1)


def train(config, loader, model, optimizer, criterion, scaler):
    model.train()
    for i, (x, targets) in enumerate(loader):
        with torch.autocast('cpu', enabled=config['use_amp']):
            output = model(x)
            loss = criterion(output, targets)
        scaler.scale(loss).backward()  # ROOT
        scaler.step(optimizer)
        scaler.update()


torch.manual_seed(0)
config = {'use_amp': False}
model = VADModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
criterion = nn.BCELoss()
scaler = torch.amp.GradScaler('cpu', enabled=config['use_amp'])
x, targets = torch.randn(4, 1, 64), torch.randint(0, 2, (4,)).float()
loader = [(x, targets)] * 5
train(config, loader, model, optimizer, criterion, scaler)
