"""PCT steps its CosineAnnealingLR after the train_loader loop of each epoch.

source: https://github.com/Strawberry-Eat-Mango/PCT_Pytorch/issues/21
kind: lookalike
"""
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import CosineAnnealingLR


class Pct(nn.Module):
    def __init__(self, output_channels=40):
        super(Pct, self).__init__()
        self.conv1 = nn.Conv1d(3, 32, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm1d(32)
        self.linear = nn.Linear(32, output_channels)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        return self.linear(x.max(dim=-1)[0])


torch.manual_seed(0)
epochs, lr, momentum = 4, 0.0001, 0.9
model = Pct()
opt = torch.optim.SGD(model.parameters(), lr=lr * 100, momentum=momentum, weight_decay=5e-4)
scheduler = CosineAnnealingLR(opt, epochs, eta_min=lr)
criterion = nn.CrossEntropyLoss()
train_loader = [(torch.randn(8, 3, 64), torch.randint(0, 40, (8,))) for _ in range(2)]
epoch_lrs = []
for epoch in range(epochs):
    epoch_lrs.append(opt.param_groups[0]['lr'])
    model.train()
    for data, label in train_loader:
        opt.zero_grad()
        logits = model(data)
        loss = criterion(logits, label)
        loss.backward()
        opt.step()
    scheduler.step()
print(epoch_lrs)
