"""ADDA critic step zeroes both the critic's and the target encoder's optimizers before backward.

source: https://github.com/corenel/pytorch-adda/issues/19
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
src_encoder = nn.Linear(6, 4)
tgt_encoder = nn.Linear(6, 4)
critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
criterion = nn.CrossEntropyLoss()
optimizer_tgt = torch.optim.Adam(tgt_encoder.parameters(), lr=1e-4, betas=(0.5, 0.999))
optimizer_critic = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.999))
data_zip = [(torch.randn(4, 6), torch.randn(4, 6)) for _ in range(3)]
for step, (images_src, images_tgt) in enumerate(data_zip):
    optimizer_critic.zero_grad()
    feat_src = src_encoder(images_src)
    feat_tgt = tgt_encoder(images_tgt)
    feat_concat = torch.cat((feat_src, feat_tgt), 0)
    pred_concat = critic(feat_concat.detach())
    label_concat = torch.cat((torch.ones(4).long(), torch.zeros(4).long()), 0)
    loss_critic = criterion(pred_concat, label_concat)
    loss_critic.backward()
    optimizer_critic.step()

    optimizer_critic.zero_grad()
    optimizer_tgt.zero_grad()
    feat_tgt = tgt_encoder(images_tgt)
    pred_tgt = critic(feat_tgt)
    loss_tgt = criterion(pred_tgt, torch.ones(4).long())
    loss_tgt.backward()
    optimizer_tgt.step()
