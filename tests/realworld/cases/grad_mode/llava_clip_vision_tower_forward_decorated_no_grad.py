"""LLaVA CLIPVisionTower: forward is decorated with @torch.no_grad(), so unfreezing the vision tower (requires_grad_(True) and passing it to the optimizer) never trains it; its weights get no gradient.

source: https://github.com/haotian-liu/LLaVA/issues/1449
kind: bug
symptom: silent
verified: every vision_tower parameter has .grad None after backward and stays unchanged while the projector trains
"""
import torch
import torch.nn as nn


class CLIPVisionModel(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, hidden, kernel_size=4, stride=4)
        self.encoder = nn.TransformerEncoderLayer(hidden, 2, 32, batch_first=True)

    def forward(self, pixel_values):
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)
        return self.encoder(x)


class CLIPVisionTower(nn.Module):
    def __init__(self, select_layer=-2):
        super().__init__()
        self.select_layer = select_layer
        self.vision_tower = CLIPVisionModel()
        self.vision_tower.requires_grad_(False)

    def feature_select(self, image_forward_outs):
        return image_forward_outs[:, 1:]

    @torch.no_grad()  # ROOT
    def forward(self, images):
        image_forward_outs = self.vision_tower(images)
        return self.feature_select(image_forward_outs).to(images.dtype)


class LlavaMetaModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision_tower = CLIPVisionTower()
        self.mm_projector = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32))
        self.lm_head = nn.Linear(32, 10)

    def forward(self, images):
        image_features = self.mm_projector(self.vision_tower(images))
        return self.lm_head(image_features).mean(1)


torch.manual_seed(0)
model = LlavaMetaModel()
model.vision_tower.requires_grad_(True)  # tune_vision_tower
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
before = model.vision_tower.vision_tower.patch_embed.weight.clone()
for step in range(2):
    images, labels = torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
