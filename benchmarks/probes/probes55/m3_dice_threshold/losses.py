import torch


class DiceLoss(torch.nn.Module):
    def __init__(self, threshold=0.5, eps=1e-6):
        super().__init__()
        self.threshold, self.eps = threshold, eps

    def forward(self, logits, target):
        probs = torch.sigmoid(logits)
        pred = (probs > self.threshold).float()  # ROOT
        inter = (pred * target).sum((1, 2))
        union = pred.sum((1, 2)) + target.sum((1, 2))
        return 1 - ((2 * inter + self.eps) / (union + self.eps)).mean()
