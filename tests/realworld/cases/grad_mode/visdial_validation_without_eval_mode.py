"""visdial-challenge-starter-pytorch's `train.py` validates at the end of every epoch under `torch.no_grad()` but never calls `model.eval()` (nor `model.train()` afterwards): the late-fusion encoder's dropout stays active while the answer options are ranked, so the reported retrieval metrics are those of a randomly thinned network which are worse than those of the same weights in eval mode, with no error.

source: https://github.com/batra-mlp-lab/visdial-challenge-starter-pytorch/commit/2850328eab3c13b5b8f2bf02ff171c7af8aa6e29
kind: bug
symptom: silent
verified: the last validation reports r@1 0.504 and mean rank 2.27 while the same weights in eval mode give r@1 0.722 and mean rank 1.56 (the look-alike reports 0.728 and 1.57, equal to its eval-mode check)
"""
import argparse
import copy

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, EMB, HIDDEN, OPTIONS, ROUNDS = 100, 32, 64, 10, 4
args = argparse.Namespace(validate=True)
config = {"model": {"dropout": 0.5}, "solver": {"num_epochs": 2, "initial_lr": 0.01}}


class LateFusionEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embed = nn.EmbeddingBag(VOCAB, EMB)
        self.fusion = nn.Linear(EMB * 2 + 16, HIDDEN)
        self.dropout = nn.Dropout(p=config["dropout"])

    def forward(self, batch):
        ques = self.word_embed(batch["ques"].flatten(0, 1)).view(*batch["ques"].shape[:2], EMB)
        hist = self.word_embed(batch["hist"].flatten(0, 1)).view(*batch["hist"].shape[:2], EMB)
        img = batch["img_feat"].unsqueeze(1).expand(-1, ROUNDS, -1)
        fused = torch.cat([ques, hist, img], -1)
        return torch.tanh(self.fusion(self.dropout(fused)))


class DiscriminativeDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embed = nn.EmbeddingBag(VOCAB, EMB)
        self.option_proj = nn.Linear(EMB, HIDDEN)

    def forward(self, encoder_output, batch):
        opts = batch["opt"]  # (b, rounds, options, words)
        b = opts.shape[0]
        opt_embed = self.option_proj(self.word_embed(opts.flatten(0, 2))).view(b, ROUNDS, OPTIONS, HIDDEN)
        return (opt_embed * encoder_output.unsqueeze(2)).sum(-1)  # scores (b, rounds, options)


class EncoderDecoderModel(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, batch):
        return self.decoder(self.encoder(batch), batch)


class SparseGTMetrics:
    def __init__(self):
        self.ranks = []

    def observe(self, scores, ans_ind):
        gt_score = scores.gather(-1, ans_ind.unsqueeze(-1))
        self.ranks.append((scores > gt_score).sum(-1).flatten() + 1)

    def retrieve(self, reset=True):
        ranks = torch.cat(self.ranks).float()
        if reset:
            self.ranks = []
        return {"r@1": (ranks <= 1).float().mean().item(), "mean": ranks.mean().item()}


def make_split(n):
    img = torch.randn(n, 16)
    ans_ind = torch.randint(0, OPTIONS, (n, ROUNDS))
    opt = torch.randint(1, VOCAB, (n, ROUNDS, OPTIONS, 5))
    ques = torch.randint(1, VOCAB, (n, ROUNDS, 6))
    # the right answer shares words with the question
    opt.scatter_(2, ans_ind.view(n, ROUNDS, 1, 1).expand(-1, -1, 1, 5), ques[:, :, None, :5])
    return [{"img_feat": img[i:i + 32], "ques": ques[i:i + 32], "hist": torch.randint(1, VOCAB, (min(32, n - i), ROUNDS, 8)),
             "opt": opt[i:i + 32], "ans_ind": ans_ind[i:i + 32]} for i in range(0, n, 32)]


train_dataloader, val_dataloader = make_split(512), make_split(256)
model = EncoderDecoderModel(LateFusionEncoder(config["model"]), DiscriminativeDecoder())
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adamax(model.parameters(), lr=config["solver"]["initial_lr"])
sparse_metrics = SparseGTMetrics()

for epoch in range(config["solver"]["num_epochs"]):
    for i, batch in enumerate(train_dataloader):
        optimizer.zero_grad()
        output = model(batch)
        batch_loss = criterion(output.view(-1, output.size(-1)), batch["ans_ind"].view(-1))
        batch_loss.backward()
        optimizer.step()

    # Validate and report automatic metrics.
    if args.validate:
        print(f"Validation after epoch {epoch}:")
        for i, batch in enumerate(val_dataloader):  # ROOT
            with torch.no_grad():
                output = model(batch)
            sparse_metrics.observe(output, batch["ans_ind"])
        all_metrics = sparse_metrics.retrieve(reset=True)
        for metric_name, metric_value in all_metrics.items():
            print(f"{metric_name}: {metric_value:.3f}")

# Measurement: the same weights, evaluated deterministically on the same validation data.
reference = copy.deepcopy(model).eval()
with torch.no_grad():
    for batch in val_dataloader:
        sparse_metrics.observe(reference(batch), batch["ans_ind"])
expected = sparse_metrics.retrieve(reset=True)
print(f"reported r@1 {all_metrics['r@1']:.3f}, mean rank {all_metrics['mean']:.2f}; "
      f"the same weights in eval mode: r@1 {expected['r@1']:.3f}, mean rank {expected['mean']:.2f}")
