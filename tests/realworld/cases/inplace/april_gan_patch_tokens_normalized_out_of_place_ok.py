"""APRIL-GAN style anomaly segmentation: CLIP patch tokens are L2-normalized out of place.

source: https://github.com/ByChelsea/VAND-APRIL-GAN/issues/9
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class LinearLayer(nn.Module):
    def __init__(self, dim_in, dim_out, k):
        super().__init__()
        self.fc = nn.ModuleList([nn.Linear(dim_in, dim_out) for _ in range(k)])

    def forward(self, tokens):
        for i in range(len(tokens)):
            tokens[i] = self.fc[i](tokens[i][:, 1:, :])
        return tokens


trainable_layer = LinearLayer(32, 16, 2)
optimizer = torch.optim.Adam(trainable_layer.parameters(), lr=1e-3, betas=(0.5, 0.999))
text_features = F.normalize(torch.randn(16, 2), dim=0)
for step in range(2):
    patch_tokens = [torch.randn(2, 17, 32), torch.randn(2, 17, 32)]
    gt = (torch.rand(2, 16) > 0.5).long()
    patch_tokens = trainable_layer(patch_tokens)
    loss = 0
    for layer in range(len(patch_tokens)):
        patch_tokens[layer] = patch_tokens[layer] / patch_tokens[layer].norm(dim=-1, keepdim=True)
        anomaly_map = (100.0 * patch_tokens[layer] @ text_features)
        loss += F.cross_entropy(anomaly_map.reshape(-1, 2), gt.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
