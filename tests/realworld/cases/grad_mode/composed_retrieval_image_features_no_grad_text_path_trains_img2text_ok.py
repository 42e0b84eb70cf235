"""Pic2Word training: the frozen CLIP image encoder runs under torch.no_grad(), and the img2text mapping network turns those features into a token that goes through the (frozen) text encoder with gradients enabled, so img2text is trained through the text path.

source: https://github.com/google-research/composed_image_retrieval/issues/24
kind: lookalike
verified: img2text weights get gradients and change; the CLIP encoders have no gradient
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CLIP(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.visual = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, width))
        self.token_embedding = nn.Embedding(50, width)
        self.text_transformer = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.Linear(width, width))

    def encode_image(self, images):
        return self.visual(images)

    def encode_text_img(self, text, img_tokens):
        x = self.token_embedding(text)
        x = torch.cat([x[:, :-1], img_tokens.unsqueeze(1)], dim=1)
        return self.text_transformer(x).mean(1)


def get_text_features(model, token_features):
    text = torch.tensor([[3, 7, 9]]).repeat(token_features.size(0), 1)
    return model.encode_text_img(text, token_features)


def get_loss_img2text(model, img2text, images):
    with torch.no_grad():
        image_features = model.encode_image(images)
    token_features = img2text(image_features)
    text_features = get_text_features(model, token_features)
    logits = F.normalize(image_features, dim=-1) @ F.normalize(text_features, dim=-1).t() / 0.07
    labels = torch.arange(images.size(0))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


torch.manual_seed(0)
model = CLIP()
for p in model.parameters():
    p.requires_grad = False
img2text = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16))
optimizer = torch.optim.AdamW(img2text.parameters(), lr=1e-3)
before = img2text[0].weight.detach().clone()
for step in range(3):
    loss = get_loss_img2text(model, img2text, torch.randn(4, 3, 8, 8))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(img2text[0].weight.grad is not None, not torch.equal(before, img2text[0].weight))
