"""SeCo change detection: the pretrained encoder is frozen by leaving its parameters out of the optimizer set.

source: https://github.com/ServiceNow/seasonal-contrast/issues/6
kind: lookalike
verified: the encoder weights are unchanged after training steps; the decoder head trains
"""
import torch
import torch.nn as nn


class SiamSegment(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.decoder = nn.Conv2d(16, 1, 1)

    def forward(self, x1, x2):
        return self.decoder(torch.cat([self.encoder(x1), self.encoder(x2)], 1))


class SiamSegmentLightning(nn.Module):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.model, self.lr = SiamSegment(), lr
        self.criterion = nn.BCEWithLogitsLoss()

    def training_step(self, batch, batch_idx):
        img_1, img_2, mask = batch
        return self.criterion(self.model(img_1, img_2), mask)

    def configure_optimizers(self):
        params = set(self.model.parameters()).difference(self.model.encoder.parameters())
        return torch.optim.Adam(params, lr=self.lr, weight_decay=1e-4)


torch.manual_seed(0)
lit = SiamSegmentLightning()
optimizer = lit.configure_optimizers()
enc_before = lit.model.encoder[0].weight.detach().clone()
dec_before = lit.model.decoder.weight.detach().clone()
for batch_idx in range(3):
    batch = (torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8), (torch.rand(2, 1, 8, 8) > 0.5).float())
    optimizer.zero_grad()
    loss = lit.training_step(batch, batch_idx)
    loss.backward()
    optimizer.step()
print(torch.equal(enc_before, lit.model.encoder[0].weight), not torch.equal(dec_before, lit.model.decoder.weight))
