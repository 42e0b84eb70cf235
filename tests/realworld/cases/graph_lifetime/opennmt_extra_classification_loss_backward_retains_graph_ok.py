"""Joint learning in an OpenNMT-style loss: the extra classification loss keeps the shared graph for the shard losses.

source: https://github.com/OpenNMT/OpenNMT-py/issues/2153
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Seq2Seq(nn.Module):
    def __init__(self, vocab=20, dim=16, n_cls=3):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.GRU(dim, dim, batch_first=True)
        self.decoder = nn.Linear(dim, vocab)
        self.cls_head = nn.Linear(dim, n_cls)

    def forward(self, src):
        enc_out, _ = self.encoder(self.embed(src))
        return self.decoder(enc_out), self.cls_head(enc_out.mean(1))


class LossComputeBase:
    def __init__(self, shard_size=4):
        self.shard_size = shard_size

    def __call__(self, output, target, stargets_logits, stargets_refs):
        class_loss = F.cross_entropy(stargets_logits, stargets_refs)
        class_loss.backward(retain_graph=True)
        total = 0.0
        for start in range(0, output.size(1), self.shard_size):
            out_shard = output[:, start:start + self.shard_size]
            tgt_shard = target[:, start:start + self.shard_size]
            loss = F.cross_entropy(out_shard.reshape(-1, out_shard.size(-1)), tgt_shard.reshape(-1))
            loss.backward(retain_graph=True)
            total += loss.item()
        return total


model = Seq2Seq()
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
compute = LossComputeBase()
src = torch.randint(0, 20, (2, 8))
tgt = torch.randint(0, 20, (2, 8))
cls = torch.randint(0, 3, (2,))
optim.zero_grad()
output, cls_logits = model(src)
compute(output, tgt, cls_logits, cls)
optim.step()
