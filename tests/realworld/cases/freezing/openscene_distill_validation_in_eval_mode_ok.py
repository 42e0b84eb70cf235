"""openscene distill.py's validation with model.eval() first (as evaluate.py does), so BatchNorm uses and keeps the running statistics of training.

source: https://github.com/pengsongyou/openscene/issues/20
kind: lookalike
verified: the running statistics are the same before and after validation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DisNet(nn.Module):
    def __init__(self, in_channels=3, out_channels=16):
        super().__init__()
        self.net3d = nn.Sequential(
            nn.Conv1d(in_channels, 32, 1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 32, 1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, out_channels, 1))

    def forward(self, sinput):
        return self.net3d(sinput)


def train(train_loader, model, optimizer):
    model.train()
    for coords, feat_3d in train_loader:
        output_3d = model(coords)
        loss = (1 - F.cosine_similarity(output_3d, feat_3d, dim=1)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate(val_loader, model):
    model.eval()
    loss_meter = []
    with torch.no_grad():
        for coords, feat_3d in val_loader:
            output_3d = model(coords)
            loss = (1 - F.cosine_similarity(output_3d, feat_3d, dim=1)).mean()
            loss_meter.append(loss.item())
    return sum(loss_meter) / len(loss_meter)


torch.manual_seed(0)
model = DisNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.randn(4, 3, 256), torch.randn(4, 16, 256)) for _ in range(3)]
val_loader = [(torch.randn(4, 3, 256) * 2 + 1, torch.randn(4, 16, 256)) for _ in range(2)]
for epoch in range(1):
    train(train_loader, model, optimizer)
    loss_val = validate(val_loader, model)
    print(f"val loss {loss_val:.4f}")
