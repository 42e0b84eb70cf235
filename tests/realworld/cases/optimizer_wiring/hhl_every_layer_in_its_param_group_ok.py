"""HHL with the reporter's fix: triplet, feat and feat_bn get their own param groups next to base and the remaining new parameters, so every layer is updated.

source: https://github.com/zhunzhong07/HHL/issues/8
kind: lookalike
verified: after 3 SGD steps model.module.feat.weight moved 0.89 (max abs)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResNet(nn.Module):
    def __init__(self, num_features=16, num_classes=5):
        super().__init__()
        self.base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.feat = nn.Linear(8, num_features)
        self.feat_bn = nn.BatchNorm1d(num_features)
        self.triplet = nn.Linear(num_features, num_features)
        self.classifier = nn.Linear(num_features, num_classes)

    def forward(self, x):
        x = self.feat_bn(self.feat(self.base(x)))
        return self.classifier(F.relu(x)), self.triplet(x)


torch.manual_seed(0)
model = nn.DataParallel(ResNet())
base_param_ids = set(map(id, model.module.base.parameters())) \
                 | set(map(id, model.module.triplet.parameters())) \
                 | set(map(id, model.module.feat.parameters())) \
                 | set(map(id, model.module.feat_bn.parameters()))
new_params = [p for p in model.parameters() if id(p) not in base_param_ids]
param_groups = [
    {'params': model.module.base.parameters(), 'lr_mult': 0.1},
    {'params': model.module.triplet.parameters(), 'lr_mult': 1.0},
    {'params': model.module.feat.parameters(), 'lr_mult': 1.0},
    {'params': model.module.feat_bn.parameters(), 'lr_mult': 1.0},
    {'params': new_params, 'lr_mult': 1.0}]
optimizer = torch.optim.SGD(param_groups, lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
for g in optimizer.param_groups:
    g['lr'] = 0.1 * g.get('lr_mult', 1)

before = model.module.feat.weight.detach().clone()
for step in range(3):
    imgs, pids = torch.randn(8, 3, 16, 16), torch.randint(0, 5, (8,))
    logits, emb = model(imgs)
    loss = F.cross_entropy(logits, pids) + F.triplet_margin_loss(emb[:4], emb[4:].roll(1, 0), emb[4:])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.module.feat.weight.grad.abs().max().item(), (model.module.feat.weight - before).abs().max().item())
