"""focal-loss-pytorch binary_focal_loss passes the sigmoid probabilities to binary_cross_entropy_with_logits, which applies the sigmoid again.

source: https://github.com/itakurah/focal-loss-pytorch/pull/5
kind: bug
symptom: silent
verified: the inner BCE term cannot fall below 0.31 (positives) / 0.69 (negatives) even for confident correct logits (+/-8), the sigmoid of a probability lying in [0.5, 0.73]; on a random batch the logit gradient differs from the fixed loss's by 0.032 (max abs; that gradient is 0.048 at most)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, gamma=2, alpha=None, reduction='mean'):
        super().__init__()
        self.gamma = gamma
        self.alpha = alpha
        self.reduction = reduction

    def forward(self, inputs, targets):
        probs = torch.sigmoid(inputs)
        targets = targets.float()
        bce_loss = F.binary_cross_entropy_with_logits(probs, targets, reduction='none')  # ROOT
        p_t = probs * targets + (1 - probs) * (1 - targets)
        focal_weight = (1 - p_t) ** self.gamma
        if self.alpha is not None:
            alpha_t = self.alpha * targets + (1 - self.alpha) * (1 - targets)
            bce_loss = alpha_t * bce_loss
        loss = focal_weight * bce_loss
        if self.reduction == 'mean':
            return loss.mean()
        elif self.reduction == 'sum':
            return loss.sum()
        return loss


torch.manual_seed(0)
model = nn.Linear(10, 1)
criterion = FocalLoss(gamma=2, alpha=0.25)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x, y = torch.randn(16, 10), torch.randint(0, 2, (16,))
    loss = criterion(model(x).squeeze(1), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
