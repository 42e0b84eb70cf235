"""Keyword-spotting Executor.train steps the optimizer without ever zeroing the gradients.

source: https://github.com/wenet-e2e/wekws/issues/72
kind: bug
symptom: silent
verified: model.classifier.weight.grad keeps growing: it holds the sum of all batches' gradients
"""
import math
import torch
import torch.nn as nn


class KWSModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.GRU(4, 8, batch_first=True)
        self.classifier = nn.Linear(8, 2)

    def forward(self, feats):
        out, _ = self.backbone(feats)
        return torch.sigmoid(self.classifier(out))


def max_pooling_binary_cross_entropy(logits, target):
    return nn.functional.binary_cross_entropy(logits.max(1)[0], target)


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, args):
        model.train()
        clip = args.get('grad_clip', 50.0)
        for batch_idx, (feats, target) in enumerate(data_loader):
            logits = model(feats)
            loss = max_pooling_binary_cross_entropy(logits, target)
            loss.backward()  # ROOT
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            self.step += 1


torch.manual_seed(0)
model = KWSModel()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
feats, target = torch.randn(4, 5, 4), torch.randint(0, 2, (4, 2)).float()
data_loader = [(feats, target)] * 5
Executor().train(model, optimizer, data_loader, {'grad_clip': 50.0})
