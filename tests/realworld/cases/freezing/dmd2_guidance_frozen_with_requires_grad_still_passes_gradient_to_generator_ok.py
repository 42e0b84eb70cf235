"""DMD2 generator turn freezes the guidance model with requires_grad_(False); gradients still flow through it to the generator.

source: https://github.com/tianweiy/DMD2/issues/75
kind: lookalike
"""
import torch
import torch.nn as nn


class GuidanceModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.fake_unet = nn.Sequential(nn.Linear(dim, 32), nn.SiLU(), nn.Linear(32, dim))
        self.cls_pred_branch = nn.Linear(dim, 1)

    def forward(self, generator_turn, guidance_turn, generator_data_dict):
        fake = generator_data_dict["image"]
        logits = self.cls_pred_branch(self.fake_unet(fake))
        return {"loss_gen_cls": nn.functional.softplus(-logits).mean()}, {}


torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 16))
guidance_model = GuidanceModel()
optimizer_generator = torch.optim.AdamW(generator.parameters(), lr=1e-4)
noise = torch.randn(4, 8)
generator_data_dict = {"image": generator(noise)}
guidance_model.requires_grad_(False)
loss_dict, log_dict = guidance_model(generator_turn=True, guidance_turn=False, generator_data_dict=generator_data_dict)
guidance_model.requires_grad_(True)
optimizer_generator.zero_grad()
loss_dict["loss_gen_cls"].backward()
optimizer_generator.step()
assert all(p.grad is not None for p in generator.parameters())
assert all(p.grad is None for p in guidance_model.parameters())
