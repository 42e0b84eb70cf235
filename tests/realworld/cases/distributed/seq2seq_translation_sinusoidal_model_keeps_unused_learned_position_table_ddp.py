"""aamster/seq2seq-translation's `_Transformer.__init__` always builds a learned position table (`nn.Embedding(block_size, d_model)`), but `_calc_embeddings` only looks it up when the positional encoding type is LEARNED; with SINUSOIDAL encoding the table is a registered parameter that never receives a gradient. Wrapped in DistributedDataParallel (without `find_unused_parameters`), the reducer waits for that parameter's gradient at the first step and the second training step fails.

source: https://github.com/aamster/seq2seq-translation/commit/031127538e040edecb154ceeca1d25b73b996173
kind: bug
symptom: crash
launch: torchrun --nproc-per-node=2
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import enum

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

torch.set_num_threads(1)

VOCAB, BLOCK, D_MODEL = 50, 16, 32


class PositionalEncodingType(enum.Enum):
    LEARNED = "learned"
    SINUSOIDAL = "sinusoidal"


class DecoderTransformer(nn.Module):
    def __init__(self, vocab_size, d_model, block_size, n_heads=4, n_layers=2,
                 positional_encoding_type=PositionalEncodingType.LEARNED):
        super().__init__()
        self._block_size = block_size
        self._d_model = d_model
        self._positional_encoding_type = positional_encoding_type
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positional_encoding = nn.Embedding(block_size, d_model)  # ROOT
        layer = nn.TransformerEncoderLayer(d_model, n_heads, 2 * d_model, dropout=0.0,
                                           batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def _calc_embeddings(self, x):
        _, t = x.shape
        tok_emb = self.embedding(x)
        if self._positional_encoding_type == PositionalEncodingType.LEARNED:
            pos = torch.arange(t, device=x.device)
            return tok_emb + self.positional_encoding(pos)
        pos = torch.arange(t, device=x.device, dtype=tok_emb.dtype)
        i = torch.arange(self._d_model, device=x.device, dtype=tok_emb.dtype)
        angle = pos[:, None] / 1e4 ** (2 * (i // 2) / self._d_model)
        table = torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle))
        return tok_emb + table

    def forward(self, x):
        t = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t)
        return self.lm_head(self.blocks(self._calc_embeddings(x), mask=mask, is_causal=True))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DecoderTransformer(VOCAB, D_MODEL, BLOCK,
                               positional_encoding_type=PositionalEncodingType.SINUSOIDAL)
    model = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(3):
        tokens = torch.randint(0, VOCAB, (4, BLOCK + 1), generator=gen)
        logits = model(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
