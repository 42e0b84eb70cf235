"""The global sampler's contrastive loss computed on a panorama decoded with grad through the frozen decoder and CLIP encoder (the maintainer removed the no_grad line): the loss trains the transformer, the frozen modules stay untouched.

source: https://github.com/FrozenBurning/Text2Light/issues/10
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GlobalSampler(nn.Module):
    """Text2Light's global sampler, cut down: a transformer head predicts soft codebook indices that a frozen
    decoder turns into a panorama, and a frozen CLIP image encoder scores the panorama against the text."""

    def __init__(self, vocab=32, dim=16):
        super().__init__()
        self.transformer = nn.Sequential(nn.Linear(dim, 64), nn.GELU(), nn.Linear(64, vocab))
        self.codebook = nn.Embedding(vocab, dim).requires_grad_(False)
        self.decoder = nn.Linear(dim, 3 * 8 * 16).requires_grad_(False)
        self.clip = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 16, 32)).requires_grad_(False)

    def decode_to_img(self, index_logits):
        z = index_logits.softmax(-1) @ self.codebook.weight  # soft index lookup
        return self.decoder(z).view(-1, 3, 8, 16)

    def contrastive_loss(self, text_cond, psed_emb):
        index_logits = self.transformer(text_cond)
        x_sample_nopix = self.decode_to_img(index_logits)
        gen_img_emb = self.clip(x_sample_nopix)
        gen_img_emb = gen_img_emb / gen_img_emb.norm(dim=-1, keepdim=True)
        sim = torch.cosine_similarity(gen_img_emb.unsqueeze(1), psed_emb.unsqueeze(0), dim=-1)
        return F.cross_entropy(sim / 0.07, torch.arange(sim.size(0)))

    def forward(self, text_cond, target_idx, psed_emb):
        ce = F.cross_entropy(self.transformer(text_cond), target_idx)
        return ce, self.contrastive_loss(text_cond, psed_emb)


torch.manual_seed(0)
model = GlobalSampler()
text_cond, target_idx = torch.randn(8, 16), torch.randint(0, 32, (8,))
psed_emb = F.normalize(torch.randn(8, 32), dim=-1)
ce, loss_clip = model(text_cond, target_idx, psed_emb)
loss = ce + loss_clip
loss.backward()
print(ce.item(), loss_clip.item())
