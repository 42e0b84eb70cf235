"""ViT Extractor used as CoCa's image encoder: its forward hook stores a detached clone of the tokens.

source: https://github.com/lucidrains/CoCa-pytorch/issues/6
kind: bug
symptom: silent
verified: the ViT's weights get no gradient from the CoCa loss
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class ViT(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.to_patch_embedding = nn.Linear(12, dim)
        self.transformer = nn.Sequential(nn.Linear(dim, dim), nn.GELU())

    def forward(self, img):
        return self.transformer(self.to_patch_embedding(img)).mean(dim=1)


class Extractor(nn.Module):
    def __init__(self, vit, layer_name="transformer"):
        super().__init__()
        self.vit = vit
        self.latents = None
        getattr(self.vit, layer_name).register_forward_hook(self._hook)

    def _hook(self, _, inputs, output):
        self.latents = output.clone().detach()  # ROOT

    def forward(self, img):
        self.latents = None
        pred = self.vit(img)
        return pred, self.latents


vit = Extractor(ViT())
text_head = nn.Linear(16, 16)
optimizer = torch.optim.Adam(list(vit.parameters()) + list(text_head.parameters()), lr=1e-3)
images, text_embeds = torch.randn(2, 5, 12), torch.randn(2, 16)
_, image_tokens = vit(images)
image_embeds = image_tokens.mean(dim=1)
logits = image_embeds @ text_head(text_embeds).t()
loss = nn.functional.cross_entropy(logits, torch.arange(2))
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(vit.vit.to_patch_embedding.weight.grad)
