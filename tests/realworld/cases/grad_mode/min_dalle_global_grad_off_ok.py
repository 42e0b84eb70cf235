"""Inference-only text-to-image script: gradients switched off globally with set_grad_enabled(False).

source: https://github.com/kuprel/min-dalle/pull/24
kind: lookalike
verified: the image tokens are generated; no parameter is ever trained in this script
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_grad_enabled(False)


class DalleBartDecoder(nn.Module):
    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.lm_head(self.embed_tokens(tokens).mean(dim=1))


decoder = DalleBartDecoder().eval()
image_tokens = torch.zeros(1, 1, dtype=torch.long)
for i in range(8):
    logits = decoder(image_tokens)
    next_token = torch.multinomial(torch.softmax(logits, dim=-1), 1)
    image_tokens = torch.cat([image_tokens, next_token], dim=1)
print(image_tokens)
