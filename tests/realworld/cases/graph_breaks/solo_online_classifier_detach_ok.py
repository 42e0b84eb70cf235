"""Self-supervised method with an online linear classifier on feats.detach(): the encoder still learns.

source: https://github.com/vturrisi/solo-learn/issues/135
kind: lookalike
verified: the encoder gets gradient from the SSL loss, the classifier from its own loss
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
projector = nn.Linear(16, 8)
classifier = nn.Linear(16, 5)
params = list(backbone.parameters()) + list(projector.parameters()) + list(classifier.parameters())
optimizer = torch.optim.SGD(params, lr=0.1)

x1, x2, y = torch.randn(6, 8), torch.randn(6, 8), torch.randint(0, 5, (6,))
feats1, feats2 = backbone(x1), backbone(x2)
logits = classifier(feats1.detach())
class_loss = F.cross_entropy(logits, y)
z1, z2 = F.normalize(projector(feats1), dim=1), F.normalize(projector(feats2), dim=1)
ssl_loss = -(z1 * z2).sum(dim=1).mean()
optimizer.zero_grad()
(ssl_loss + class_loss).backward()
optimizer.step()
print(backbone[0].weight.grad.abs().sum().item() > 0, classifier.weight.grad is not None)
