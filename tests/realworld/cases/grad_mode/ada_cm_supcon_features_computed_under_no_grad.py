"""Ada-CM computes the unlabeled features for its supervised-contrastive (SupCon) loss inside torch.no_grad(), so loss_su is a constant: the projection head used only by that loss never gets a gradient and the backbone learns from the labeled cross-entropy alone.

source: https://github.com/hangyu94/Ada-CM/issues/8
kind: bug
symptom: silent
verified: on the same batch loss_su is 5.286 in both forms but does not require grad: head.weight.grad is None and the first backbone layer's gradient has norm 0.220 (cross-entropy only); with the unlabeled forward outside no_grad (pseudo-labels from detached logits, as in SupContrast) the head's gradient has norm 4.89 and the backbone's 2.10
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SupConLoss(nn.Module):
    """Supervised contrastive loss (Khosla et al.), as in HobbitLong/SupContrast, cut down."""

    def __init__(self, temperature=0.07):
        super().__init__()
        self.temperature = temperature

    def forward(self, features, labels):
        # features: [bsz, n_views, dim], L2-normalised
        bsz, n_views = features.shape[0], features.shape[1]
        contrast = torch.cat(torch.unbind(features, dim=1), dim=0)
        labels = labels.repeat(n_views)
        mask = (labels[:, None] == labels[None, :]).float()
        logits = contrast @ contrast.t() / self.temperature
        logits_mask = 1 - torch.eye(bsz * n_views)
        mask = mask * logits_mask
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1).clamp(min=1)
        return -mean_log_prob_pos.mean()


class Model(nn.Module):
    def __init__(self, num_classes=7):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 16)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        feat = self.backbone(x)
        return F.normalize(self.head(feat), dim=1), self.fc(feat)


torch.manual_seed(0)
model = Model()
criterion_su = SupConLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
imgs_x, labels_x = torch.randn(16, 32), torch.randint(0, 7, (16,))
imgs_u, imgs_u2 = torch.randn(24, 32), torch.randn(24, 32)
_, logits_x = model(imgs_x)
loss_ce = F.cross_entropy(logits_x, labels_x)
with torch.no_grad():  # ROOT
    feature_u, outputs_u = model(imgs_u)
    feature_u2, _ = model(imgs_u2)
pseudo_label = outputs_u.argmax(dim=1)
features = torch.cat([feature_u.unsqueeze(1), feature_u2.unsqueeze(1)], dim=1)
loss_su = criterion_su(features, pseudo_label)
loss = loss_ce + 0.5 * loss_su
optimizer.zero_grad()
loss.backward()
print(loss.item())
optimizer.step()
