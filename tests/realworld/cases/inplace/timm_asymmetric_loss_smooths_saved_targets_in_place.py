"""timm's AsymmetricLossSingleLabel applies label smoothing with `self.targets_classes.mul_(1 - self.eps).add_(self.eps / num_classes)`, in place on the one-hot targets that `xs_pos * targets` saved for backward a few lines earlier: with eps > 0 training a classifier with the loss fails at loss.backward().

source: https://github.com/huggingface/pytorch-image-models/pull/1500
kind: bug
symptom: crash
verified: RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class AsymmetricLossSingleLabel(nn.Module):
    def __init__(self, gamma_pos=1, gamma_neg=4, eps: float = 0.1, reduction='mean'):
        super(AsymmetricLossSingleLabel, self).__init__()

        self.eps = eps
        self.logsoftmax = nn.LogSoftmax(dim=-1)
        self.targets_classes = []  # prevent gpu repeated memory allocation
        self.gamma_pos = gamma_pos
        self.gamma_neg = gamma_neg
        self.reduction = reduction

    def forward(self, inputs, target, reduction=None):
        num_classes = inputs.size()[-1]
        log_preds = self.logsoftmax(inputs)
        self.targets_classes = torch.zeros_like(inputs).scatter_(1, target.long().unsqueeze(1), 1)

        # ASL weights
        targets = self.targets_classes
        anti_targets = 1 - targets
        xs_pos = torch.exp(log_preds)
        xs_neg = 1 - xs_pos
        xs_pos = xs_pos * targets
        xs_neg = xs_neg * anti_targets
        asymmetric_w = torch.pow(1 - xs_pos - xs_neg,
                                 self.gamma_pos * targets + self.gamma_neg * anti_targets)
        log_preds = log_preds * asymmetric_w

        if self.eps > 0:  # label smoothing
            self.targets_classes.mul_(1 - self.eps).add_(self.eps / num_classes)  # ROOT

        # loss calculation
        loss = - self.targets_classes.mul(log_preds)

        loss = loss.sum(dim=-1)
        if self.reduction == 'mean':
            loss = loss.mean()

        return loss


torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))
train_loss_fn = AsymmetricLossSingleLabel(gamma_pos=0, gamma_neg=4, eps=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for batch_idx in range(3):
    input, target = torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,))
    output = model(input)
    loss = train_loss_fn(output, target)
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
    print(batch_idx, loss.item())
