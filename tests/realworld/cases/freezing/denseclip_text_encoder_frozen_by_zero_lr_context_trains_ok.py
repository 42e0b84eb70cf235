"""DenseCLIP as released: the text encoder is kept fixed by giving its parameter group lr=0.0 (not by torch.no_grad), because the learnable context is its input and needs the gradient through it.

source: https://github.com/raoyongming/DenseCLIP/issues/5
kind: lookalike
verified: the contexts get a gradient and change; the text encoder weights get gradients but stay identical (lr 0)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TextEncoder(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.transformer = nn.TransformerEncoderLayer(width, 2, 32, dropout=0.0, batch_first=True)
        self.text_projection = nn.Linear(width, width)

    def forward(self, prompts):
        return self.text_projection(self.transformer(prompts)[:, -1])


class DenseCLIP(nn.Module):
    def __init__(self, num_classes=5, context_length=4, width=16):
        super().__init__()
        self.visual = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.text_encoder = TextEncoder(width)
        self.class_embeddings = nn.Parameter(torch.randn(num_classes, 1, width), requires_grad=False)
        self.contexts = nn.Parameter(torch.randn(1, context_length, width) * 0.02)

    def forward(self, img):
        prompts = torch.cat([self.contexts.expand(self.class_embeddings.size(0), -1, -1),
                             self.class_embeddings], dim=1)
        text_embeddings = self.text_encoder(prompts)
        visual_embeddings = self.visual(img)
        return F.normalize(visual_embeddings, dim=-1) @ F.normalize(text_embeddings, dim=-1).t() / 0.07


torch.manual_seed(0)
model = DenseCLIP()
optimizer = torch.optim.AdamW([
    {'params': model.text_encoder.parameters(), 'lr': 0.0, 'weight_decay': 0.0},
    {'params': model.visual.parameters()},
    {'params': [model.contexts]},
], lr=1e-3)
contexts_before = model.contexts.detach().clone()
for step in range(3):
    img, label = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
    loss = F.cross_entropy(model(img), label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.contexts.grad is not None, not torch.equal(model.contexts, contexts_before))
