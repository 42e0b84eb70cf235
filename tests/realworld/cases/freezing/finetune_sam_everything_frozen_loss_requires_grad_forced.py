"""finetune-SAM: with encoder and mask decoder both frozen, loss.requires_grad = True hides that nothing can train.

source: https://github.com/mazurowski-lab/finetune-SAM/issues/26
kind: bug
symptom: silent
verified: no parameter ever gets a gradient; sam.mask_decoder weights never change
"""
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinySam(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.prompt_encoder = nn.Conv2d(8, 8, 1)
        self.mask_decoder = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1))

    def forward(self, imgs):
        img_emb = self.image_encoder(imgs)
        return self.mask_decoder(self.prompt_encoder(img_emb))


torch.manual_seed(0)
args = argparse.Namespace(if_update_encoder=False, if_mask_decoder_adapter=False, lr=1e-4)
sam = TinySam()
if not args.if_update_encoder:
    for n, value in sam.image_encoder.named_parameters():
        value.requires_grad = False
for n, value in sam.prompt_encoder.named_parameters():
    value.requires_grad = False
for n, value in sam.mask_decoder.named_parameters():
    if args.if_mask_decoder_adapter and "Adapter" in n:
        value.requires_grad = True
    else:
        value.requires_grad = False  # ROOT
optimizer = torch.optim.AdamW(sam.parameters(), lr=args.lr, weight_decay=0)
criterion = nn.BCEWithLogitsLoss()
trainloader = [(torch.rand(2, 3, 16, 16), (torch.rand(2, 1, 16, 16) > 0.5).float()) for _ in range(3)]
for epoch in range(2):
    for imgs, msks in trainloader:
        optimizer.zero_grad()
        pred = sam(imgs)
        loss = criterion(pred, msks) + F.mse_loss(torch.sigmoid(pred), msks)
        loss.requires_grad = True
        loss.backward()
        optimizer.step()
