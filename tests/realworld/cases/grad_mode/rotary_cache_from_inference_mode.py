"""Rotary embedding caches cos/sin during evaluation under inference_mode, then training reuses them.

source: https://github.com/Dao-AILab/flash-attention/pull/299
kind: bug
symptom: crash
verified: RuntimeError: Inference tensors cannot be saved for backward.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim),
                             persistent=False)
        self._seq_len_cached = 0
        self._cos_cached = self._sin_cached = None

    def _update_cos_sin_cache(self, seqlen):
        if seqlen > self._seq_len_cached:  # ROOT
            self._seq_len_cached = seqlen
            t = torch.arange(seqlen, dtype=self.inv_freq.dtype)
            freqs = torch.outer(t, self.inv_freq)
            self._cos_cached, self._sin_cached = torch.cos(freqs), torch.sin(freqs)

    def forward(self, qkv):
        seqlen = qkv.shape[1]
        self._update_cos_sin_cache(seqlen)
        cos, sin = self._cos_cached[:seqlen], self._sin_cached[:seqlen]
        x1, x2 = qkv.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class MHA(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.Wqkv = nn.Linear(dim, dim)
        self.rotary_emb = RotaryEmbedding(dim)

    def forward(self, x):
        return self.rotary_emb(self.Wqkv(x))


model = MHA()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model.eval()
with torch.inference_mode():
    model(torch.randn(2, 16, 8))
model.train()
loss = model(torch.randn(2, 16, 8)).pow(2).mean()
loss.backward()  # SYMPTOM
optimizer.step()
