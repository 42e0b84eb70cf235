"""KBRD's transformer configured with learn_positional_embeddings=True: the position embedding weight is initialized with nn.init.normal_, which writes into the Parameter without recording autograd history, so the model builds and the position embeddings train.

source: https://github.com/THUDM/KBRD/issues/23
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def create_position_codes(n_pos, dim, out):
    position_enc = np.array([
        [pos / np.power(10000, 2 * j / dim) for j in range(dim // 2)]
        for pos in range(n_pos)
    ])

    with torch.no_grad():  # (lead: the fixed-codes branch written as the fix, see heldout18.md)
        out[:, 0::2] = torch.FloatTensor(np.sin(position_enc)).type_as(out)
        out[:, 1::2] = torch.FloatTensor(np.cos(position_enc)).type_as(out)
    out.detach_()
    out.requires_grad = False


class TransformerEncoder(nn.Module):
    def __init__(self, n_heads, n_layers, embedding_size, ffn_size, vocabulary_size, embedding,
                 dropout=0.0, padding_idx=0, learn_positional_embeddings=False, n_positions=64):
        super().__init__()
        self.embedding_size = embedding_size
        self.embeddings = embedding
        self.padding_idx = padding_idx
        self.position_embeddings = nn.Embedding(n_positions, embedding_size)
        if not learn_positional_embeddings:
            create_position_codes(
                n_positions, embedding_size, out=self.position_embeddings.weight
            )
        else:
            nn.init.normal_(self.position_embeddings.weight, 0, embedding_size ** -0.5)
        layer = nn.TransformerEncoderLayer(embedding_size, n_heads, ffn_size, dropout, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, n_layers)

    def forward(self, input):
        mask = input != self.padding_idx
        positions = (mask.cumsum(dim=1, dtype=torch.int64) - 1).clamp_(min=0)
        tensor = self.embeddings(input) + self.position_embeddings(positions)
        tensor = self.layers(tensor, src_key_padding_mask=~mask)
        return (tensor * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)


class TransformerRecModel(nn.Module):
    def __init__(self, opt, vocab_size, n_movies):
        super().__init__()
        embedding = nn.Embedding(vocab_size, opt["embedding_size"], padding_idx=0)
        self.encoder = TransformerEncoder(opt["n_heads"], opt["n_layers"], opt["embedding_size"],
                                          opt["ffn_size"], vocab_size, embedding,
                                          learn_positional_embeddings=opt["learn_positional_embeddings"])
        self.rec_head = nn.Linear(opt["embedding_size"], n_movies)

    def forward(self, xs):
        return self.rec_head(self.encoder(xs))


opt = {"embedding_size": 32, "n_heads": 2, "n_layers": 2, "ffn_size": 64, "learn_positional_embeddings": True}
torch.manual_seed(0)
model = TransformerRecModel(opt, vocab_size=100, n_movies=20)
optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(5):
    xs = torch.randint(1, 100, (8, 16))
    ys = torch.randint(0, 20, (8,))
    loss = F.cross_entropy(model(xs), ys)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("loss", loss.item(), "position codes trainable", model.encoder.position_embeddings.weight.requires_grad)
