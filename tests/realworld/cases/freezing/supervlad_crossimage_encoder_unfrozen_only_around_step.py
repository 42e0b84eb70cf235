"""SuperVLAD train.py: the cross-image encoder is unfrozen only around optim_encoder.step(), after the backward.

source: https://github.com/Lu-Feng/SuperVLAD/issues/1
kind: bug
symptom: silent
verified: model.encoder weights change on the first iteration only; afterwards their .grad is None at every step
"""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class SuperVLADNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(16, 32)
        self.aggregation = nn.Linear(32, 8)
        self.encoder = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)

    def forward(self, x):
        desc = F.normalize(self.aggregation(torch.relu(self.backbone(x))), dim=-1)
        return F.normalize(self.encoder(desc.unsqueeze(0)).squeeze(0), dim=-1)


torch.manual_seed(0)
args = argparse.Namespace(lr=1e-4, lr_encoder=1e-4, crossimage_encoder=True)
model = SuperVLADNet()
criterion_triplet = nn.TripletMarginLoss(margin=0.1, p=2, reduction="sum")
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
optim_encoder = torch.optim.Adam(model.encoder.parameters(), lr=args.lr_encoder)
for it in range(3):
    images = torch.randn(12, 16)
    features = model(images)
    loss = criterion_triplet(features[0:4], features[4:8], features[8:12])
    optimizer.zero_grad()
    optim_encoder.zero_grad()
    loss.backward()
    optimizer.step()
    if args.crossimage_encoder:
        for p in model.encoder.parameters():
            p.requires_grad = True
        optim_encoder.step()
        for p in model.encoder.parameters():
            p.requires_grad = False  # ROOT
