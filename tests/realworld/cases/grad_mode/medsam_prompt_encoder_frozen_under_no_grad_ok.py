"""MedSAM fine-tuning: the prompt encoder runs under torch.no_grad() on purpose; image encoder and mask decoder train.

source: https://github.com/bowang-lab/MedSAM/issues/233
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MedSAM(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.prompt_encoder = nn.Linear(4, 8)
        self.mask_decoder = nn.Conv2d(8, 1, 1)
        for param in self.prompt_encoder.parameters():
            param.requires_grad = False

    def forward(self, image, box):
        image_embedding = self.image_encoder(image)
        with torch.no_grad():
            sparse_embeddings = self.prompt_encoder(box)
        return self.mask_decoder(image_embedding + sparse_embeddings[:, :, None, None])


medsam_model = MedSAM()
params = list(medsam_model.image_encoder.parameters()) + list(medsam_model.mask_decoder.parameters())
optimizer = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01)
for step in range(3):
    image, box = torch.randn(2, 3, 16, 16), torch.rand(2, 4)
    gt = (torch.rand(2, 1, 16, 16) > 0.5).float()
    pred = medsam_model(image, box)
    loss = F.binary_cross_entropy_with_logits(pred, gt)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
