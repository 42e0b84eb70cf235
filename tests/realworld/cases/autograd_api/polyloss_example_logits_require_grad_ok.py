"""polyloss-pytorch README example with the change from the issue: logits = torch.rand([batch_size, num_classes], requires_grad=True), so the Poly1 loss has a graph and backward fills logits.grad.

source: https://github.com/abhuse/polyloss-pytorch/issues/4
kind: lookalike
"""
import torch
import torch.nn.functional as F
from torch import Tensor


class Poly1CrossEntropyLoss(torch.nn.Module):
    def __init__(self, num_classes: int, epsilon: float = 1.0, reduction: str = "none", weight: Tensor = None):
        super(Poly1CrossEntropyLoss, self).__init__()
        self.num_classes = num_classes
        self.epsilon = epsilon
        self.reduction = reduction
        self.weight = weight

    def forward(self, logits, labels):
        labels_onehot = F.one_hot(labels, num_classes=self.num_classes).to(device=logits.device, dtype=logits.dtype)
        pt = torch.sum(labels_onehot * F.softmax(logits, dim=-1), dim=-1)
        CE = F.cross_entropy(input=logits, target=labels, reduction='none', weight=self.weight)
        poly1 = CE + self.epsilon * (1 - pt)
        if self.reduction == "mean":
            poly1 = poly1.mean()
        elif self.reduction == "sum":
            poly1 = poly1.sum()
        return poly1


batch_size = 10
num_classes = 5
logits = torch.rand([batch_size, num_classes], requires_grad=True)
labels = torch.randint(0, num_classes, [batch_size])
loss = Poly1CrossEntropyLoss(num_classes=num_classes, reduction='mean')(logits, labels)
loss.backward()
