"""TinyLLaVA's CLIPVisionTower.forward is decorated with @torch.no_grad(), copied from LLaVA where the vision tower is always frozen: with tune_entire_model / tune_vision_tower the training script unlocks the ViT (requires_grad_(True)) and hands it to the optimizer, but its features are computed without a graph, so the vision tower never receives a gradient and fine-tuning it does nothing.

source: https://github.com/TinyLLaVA/TinyLLaVA_Factory/issues/17
kind: bug
symptom: silent
verified: with the ViT unlocked (all its parameters require grad) it moves 0.0 in 20 AdamW steps and its .grad stays None; the projector moves 2.2649; with the decorator commented out (the fix, commit 84331dc) the vision tower moves 2.1887
"""
from types import SimpleNamespace

import torch
import torch.nn as nn


class TinyCLIPVisionModel(nn.Module):
    def __init__(self, hidden=32, layers=3):
        super().__init__()
        self.patch_embed = nn.Linear(48, hidden)
        self.layers = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))

    def forward(self, pixel_values, output_hidden_states=True):
        h = self.patch_embed(pixel_values)
        hidden_states = [h]
        for layer in self.layers:
            h = torch.nn.functional.gelu(layer(h))
            hidden_states.append(h)
        return SimpleNamespace(hidden_states=tuple(hidden_states))


class CLIPVisionTower(nn.Module):
    def __init__(self, select_layer=-2, select_feature="patch"):
        super().__init__()
        self.select_layer, self.select_feature = select_layer, select_feature
        self.load_model()

    def load_model(self):
        self.vision_tower = TinyCLIPVisionModel()
        self.vision_tower.requires_grad_(False)

    def feature_select(self, image_forward_outs):
        image_features = image_forward_outs.hidden_states[self.select_layer]
        if self.select_feature == "patch":
            image_features = image_features[:, 1:]
        return image_features

    @torch.no_grad()  # ROOT
    def forward(self, images):
        image_forward_outs = self.vision_tower(images, output_hidden_states=True)
        return self.feature_select(image_forward_outs).to(images.dtype)


def unlock_vit(vision_tower):
    for p in vision_tower.vision_tower.parameters():
        p.requires_grad = True


torch.manual_seed(0)
vision_tower = CLIPVisionTower()
mm_projector = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64))
lm_head = nn.Linear(64, 10)
tune_entire_model = True
if tune_entire_model:
    unlock_vit(vision_tower)
params = [p for m in (vision_tower, mm_projector, lm_head) for p in m.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=1e-3)
vit_start = [p.detach().clone() for p in vision_tower.parameters()]
proj_start = [p.detach().clone() for p in mm_projector.parameters()]
images, labels = torch.randn(8, 17, 48), torch.randint(0, 10, (8,))
for _ in range(20):
    logits = lm_head(mm_projector(vision_tower(images)).mean(1))
    loss = nn.functional.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
moved = lambda ps, qs: sum((p - q).norm() for p, q in zip(ps, qs)).item()
print("vit requires grad", all(p.requires_grad for p in vision_tower.parameters()),
      "vit moved", moved(vision_tower.parameters(), vit_start), "grad is None", vision_tower.vision_tower.patch_embed.weight.grad is None,
      "projector moved", moved(mm_projector.parameters(), proj_start))
