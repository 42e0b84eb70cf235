"""DenseCLIP/CoOp-style learnable text context: to speed up training the frozen CLIP text encoder is run under torch.no_grad(), but the learnable context vectors are its input, so the prompt tokens receive no gradient and never change (the authors: no_grad cannot be used, the text encoder must be frozen by lr=0 instead).

source: https://github.com/raoyongming/DenseCLIP/issues/5
kind: bug
symptom: silent
verified: the learnable contexts have .grad None after backward and keep their initial values; only the visual head changes
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
        for p in self.text_encoder.parameters():
            p.requires_grad = False
        self.class_embeddings = nn.Parameter(torch.randn(num_classes, 1, width), requires_grad=False)
        self.contexts = nn.Parameter(torch.randn(1, context_length, width) * 0.02)

    def forward(self, img):
        prompts = torch.cat([self.contexts.expand(self.class_embeddings.size(0), -1, -1),
                             self.class_embeddings], dim=1)
        with torch.no_grad():  # ROOT
            text_embeddings = self.text_encoder(prompts)
        visual_embeddings = self.visual(img)
        return F.normalize(visual_embeddings, dim=-1) @ F.normalize(text_embeddings, dim=-1).t() / 0.07


torch.manual_seed(0)
model = DenseCLIP()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
contexts_before = model.contexts.detach().clone()
for step in range(3):
    img, label = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
    loss = F.cross_entropy(model(img), label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.contexts.grad, torch.equal(model.contexts, contexts_before))
