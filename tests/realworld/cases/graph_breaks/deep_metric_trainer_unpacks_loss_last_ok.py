"""Deep_Metric with the trainer fixed as suggested in the thread: it unpacks the Weight loss outputs in their return order (mean_pos_sim, mean_neg_sim, prec, loss), so backward runs on the loss tensor.

source: https://github.com/bnu-wangxun/Deep_Metric/issues/26
kind: lookalike
verified: two training batches run
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class WeightLoss(nn.Module):
    def __init__(self, margin=0.5):
        super().__init__()
        self.margin = margin

    def forward(self, inputs, targets):
        inputs = F.normalize(inputs, dim=1)
        sim_mat = inputs @ inputs.t()
        pos_mask = (targets[:, None] == targets[None, :]) & ~torch.eye(len(targets), dtype=torch.bool)
        neg_mask = targets[:, None] != targets[None, :]
        pos_sim, neg_sim = sim_mat[pos_mask], sim_mat[neg_mask]
        loss = (1 - pos_sim).mean() + F.relu(neg_sim - self.margin).mean()
        prec = float((neg_sim < self.margin).float().mean())
        mean_pos_sim = float(pos_sim.mean())
        mean_neg_sim = float(neg_sim.mean())
        return mean_pos_sim, mean_neg_sim, prec, loss


def train(epoch, model, criterion, optimizer, train_loader):
    model.train()
    for inputs, labels in train_loader:
        optimizer.zero_grad()
        embed_feat = model(inputs)
        dist_ap, dist_an, inter_, loss = criterion(embed_feat, labels)
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16))
criterion = WeightLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
train_loader = [(torch.randn(16, 32), torch.arange(4).repeat_interleave(4)) for _ in range(2)]
train(0, model, criterion, optimizer, train_loader)
