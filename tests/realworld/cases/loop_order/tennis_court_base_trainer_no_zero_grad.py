"""base_trainer.train() backpropagates and steps every batch without optimizer.zero_grad().

source: https://github.com/yastrebksv/TennisCourtDetector/issues/7
kind: bug
symptom: silent
verified: model.out.weight.grad after an epoch is the sum of all its batches' gradients
"""
import torch
import torch.nn as nn


class BallTrackerNet(nn.Module):
    def __init__(self, out_channels=3):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.out = nn.Conv2d(8, out_channels, 1)

    def forward(self, x):
        return self.out(torch.relu(self.conv(x)))


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(torch.sigmoid(out), gt_hm_hp)
        loss.backward()  # ROOT
        optimizer.step()
        losses.append(loss.item())
        if iter_id > max_iters:
            break
    return sum(losses) / len(losses)


torch.manual_seed(0)
model = BallTrackerNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-5, betas=(0.9, 0.999), weight_decay=0)
criterion = nn.MSELoss()
imgs, hms = torch.randn(2, 3, 8, 8), torch.rand(2, 3, 8, 8)
train_loader = [(imgs, hms)] * 5
train(model, train_loader, optimizer, criterion, 'cpu', epoch=0)
