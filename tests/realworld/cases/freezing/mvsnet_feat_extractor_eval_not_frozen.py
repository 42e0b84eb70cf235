"""3DVNet "freezes" the MnasNet feature extractor with .eval() in training_step; Adam still updates it.

source: https://github.com/alexrich021/3dvnet/issues/11
kind: bug
symptom: silent
verified: mvsnet.feat_extractor weights change every training step although it is meant to be frozen
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MVSNet(nn.Module):
    def __init__(self, feat_dim):
        super().__init__()
        self.feat_extractor = nn.Sequential(nn.Conv2d(3, feat_dim, 3, padding=1), nn.BatchNorm2d(feat_dim), nn.ReLU())
        self.feat_shrinker = nn.Conv2d(feat_dim, feat_dim, 1)
        self.depth_head = nn.Conv2d(feat_dim, 1, 1)

    def forward(self, images):
        return self.depth_head(self.feat_shrinker(self.feat_extractor(images))).squeeze(1)


class PL3DVNet(nn.Module):
    def __init__(self, feat_dim=8, lr=1e-3, finetune=False):
        super().__init__()
        self.lr, self.finetune = lr, finetune
        self.mvsnet = MVSNet(feat_dim)
        self.refine_full = nn.Conv2d(1 + 3, 1, 3, padding=1)

    def forward(self, images):
        depth_pred = self.mvsnet(images)
        return self.refine_full(torch.cat([images, depth_pred.unsqueeze(1)], 1)).squeeze(1)

    def training_step(self, batch, batch_idx):
        if not self.finetune:
            self.mvsnet.feat_extractor.eval()
        images, depth_images = batch
        return F.l1_loss(self(images), depth_images)

    def configure_optimizers(self):
        return torch.optim.Adam([
            {'params': self.mvsnet.parameters()},  # ROOT
            {'params': self.refine_full.parameters()},
        ], lr=self.lr)


torch.manual_seed(0)
model = PL3DVNet()
optimizer = model.configure_optimizers()
before = model.mvsnet.feat_extractor[0].weight.detach().clone()
model.train()
for batch_idx in range(3):
    batch = (torch.randn(2, 3, 8, 8), torch.rand(2, 8, 8))
    optimizer.zero_grad()
    loss = model.training_step(batch, batch_idx)
    loss.backward()
    optimizer.step()
print("feat_extractor changed:", not torch.equal(before, model.mvsnet.feat_extractor[0].weight))
