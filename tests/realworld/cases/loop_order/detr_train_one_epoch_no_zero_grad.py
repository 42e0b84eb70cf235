"""train_one_epoch backpropagates, clips and steps, but never calls optimizer.zero_grad().

source: https://github.com/IDEA-Research/DN-DETR/issues/19
kind: bug
symptom: silent
verified: model.class_embed.weight.grad after training is the sum of every iteration's gradient
"""
import torch
import torch.nn as nn


class DETRLite(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(6, 8)
        self.class_embed = nn.Linear(8, 3)

    def forward(self, samples):
        return self.class_embed(torch.relu(self.backbone(samples)))


class SetCriterion(nn.Module):
    weight_dict = {'loss_ce': 1.0}

    def forward(self, outputs, targets):
        return {'loss_ce': nn.functional.cross_entropy(outputs, targets)}


def train_one_epoch(model, criterion, data_loader, optimizer, max_norm=0.1):
    model.train()
    for samples, targets in data_loader:
        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        losses.backward()  # ROOT
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()


torch.manual_seed(0)
model, criterion = DETRLite(), SetCriterion()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=1e-4)
samples, targets = torch.randn(8, 6), torch.randint(0, 3, (8,))
data_loader = [(samples, targets)] * 6
train_one_epoch(model, criterion, data_loader, optimizer)
