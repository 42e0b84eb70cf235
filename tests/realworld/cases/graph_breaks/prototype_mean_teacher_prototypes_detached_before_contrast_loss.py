"""Prototype-Mean-Teacher detaches the student prototypes in place while the prototype losses still need them.

source: https://github.com/imatif17/Prototype-Mean-Teacher/issues/14
kind: bug
symptom: crash
verified: Trying to use a saved tensor that has been detached in-place
"""
import itertools
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class PrototypeHead(nn.Module):
    def __init__(self, dim, num_classes, contra=True):
        super().__init__()
        self.proj_s1 = nn.Linear(dim, dim)
        self.proj_s2 = nn.Linear(dim, dim)
        self.num_classes = num_classes
        self.contra = contra

    def class_means(self, feats, labels):
        return torch.stack([feats[labels == c].mean(0) for c in range(self.num_classes)])

    def forward(self, feat_s, feat_t, labels):
        self.prototype_s1 = self.class_means(self.proj_s1(feat_s), labels)
        self.prototype_s2 = self.class_means(self.proj_s2(feat_s), labels)
        self.prototype_t = self.class_means(feat_t, labels)
        loss_pro1 = F.cosine_similarity(self.prototype_s1, self.prototype_t).abs().mean()
        loss_pro2 = F.cosine_similarity(self.prototype_s2, self.prototype_t).abs().mean()
        loss_pro3 = F.cosine_similarity(self.prototype_s1, self.prototype_s2).abs().mean()
        loss = -(loss_pro1 + loss_pro2 + loss_pro3) / 3
        self.prototype_t.detach_()
        self.prototype_s1.detach_()  # ROOT
        self.prototype_s2.detach_()

        loss_c = 0
        if self.contra:
            for i, j in itertools.combinations(list(range(len(self.prototype_s1))), 2):
                loss_c += F.cosine_similarity(self.prototype_s1[i].view(-1, 1),
                                              self.prototype_s1[j].view(-1, 1)).abs().mean()
            loss_c = loss_c / math.comb(len(self.prototype_s1), 2)
            self.prototype_s1.detach_()
        return loss, loss_c


torch.manual_seed(0)
backbone = nn.Linear(6, 8)
head = PrototypeHead(8, num_classes=3)
optimizer = torch.optim.SGD(list(backbone.parameters()) + list(head.parameters()), lr=0.1)
x, labels = torch.randn(12, 6), torch.arange(12) % 3
for _ in range(3):
    feat_s = backbone(x)
    feat_t = backbone(x + 0.01 * torch.randn_like(x)).detach()
    loss, loss_c = head(feat_s, feat_t, labels)
    optimizer.zero_grad()
    (loss + loss_c).backward()  # SYMPTOM
    optimizer.step()
