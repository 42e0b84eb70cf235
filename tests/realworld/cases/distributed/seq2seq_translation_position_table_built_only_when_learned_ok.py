"""aamster/seq2seq-translation's `_Transformer` after its fix: `__init__` builds the learned position table only when the positional encoding type is LEARNED (`None` otherwise), so a SINUSOIDAL model has no parameter outside the forward pass and DistributedDataParallel (without `find_unused_parameters`) trains it step after step.

source: https://github.com/aamster/seq2seq-translation/commit/031127538e040edecb154ceeca1d25b73b996173
kind: lookalike
launch: torchrun --nproc-per-node=2
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
        if positional_encoding_type == PositionalEncodingType.LEARNED:
            self.positional_encoding = nn.Embedding(block_size, d_model)
        else:
            self.positional_encoding = None
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
