"""VILA's _embed with the PR's fix: the dummy media embeddings are added out of place, text_embeds = text_embeds + torch.sum(dummy_embed) * 0, so the embedding output that enable_input_require_grads made a leaf requiring grad is not modified and the projector trains.

source: https://github.com/NVlabs/VILA/pull/199
kind: lookalike
"""
from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyLlm(nn.Module):
    def __init__(self, vocab_size=50, hidden_size=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layer = nn.TransformerEncoderLayer(hidden_size, 2, 32, batch_first=True)
        self.lm_head = nn.Linear(hidden_size, vocab_size)

    def get_input_embeddings(self):
        return self.embed_tokens

    def enable_input_require_grads(self):
        def make_inputs_require_grads(module, input, output):
            output.requires_grad_(True)

        self._require_grads_hook = self.get_input_embeddings().register_forward_hook(make_inputs_require_grads)

    def forward(self, inputs_embeds):
        return self.lm_head(self.layer(inputs_embeds))


class VILA(nn.Module):
    def __init__(self, hidden_size=16):
        super().__init__()
        self.llm = TinyLlm(hidden_size=hidden_size)
        self.vision_tower = nn.Linear(12, 24)
        self.mm_projector = nn.Sequential(nn.Linear(24, hidden_size), nn.GELU(), nn.Linear(hidden_size, hidden_size))

    def _embed_media_tokens(self, media):
        return {name: deque(self.mm_projector(self.vision_tower(images)) for images in media[name]) for name in media}

    def _embed(self, input_ids, media, labels):
        text_embeds = self.llm.embed_tokens(input_ids)
        media_embeds = self._embed_media_tokens(media)
        while media_embeds.get("dummy"):
            dummy_embed = media_embeds["dummy"].popleft()
            text_embeds = text_embeds + torch.sum(dummy_embed) * 0
        image_embeds = torch.stack(list(media_embeds["image"]))
        return torch.cat([image_embeds, text_embeds], dim=1), labels

    def forward(self, input_ids, media, labels):
        inputs_embeds, labels = self._embed(input_ids, media, labels)
        logits = self.llm(inputs_embeds)[:, -labels.shape[1]:]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


torch.manual_seed(0)
model = VILA()
model.llm.requires_grad_(False)
model.llm.enable_input_require_grads()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(3):
    input_ids = torch.randint(0, 50, (2, 6))
    media = {"image": [torch.randn(4, 12), torch.randn(4, 12)], "dummy": [torch.randn(1, 12)]}
    loss = model(input_ids, media, labels=input_ids)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item())
