"""The delete-and-retrieve style-transfer seq2seq after its fix: `Evaluator.predict` calls `net.eval()` before decoding, so the network `Trainer.train` left in training mode decodes free-running (no teacher forcing on the reference, no dropout) and two calls on the same dev set give the same predictions.

source: https://github.com/CenIII/Text-style-transfer-DeleteRetrieve/commit/622ac7f2defeffac80a799be30383b455a0773e8
kind: lookalike
"""
import random

import torch
from torch import nn
import torch.nn.functional as F

random.seed(0)
torch.manual_seed(0)
torch.set_num_threads(1)

VOCAB, HIDDEN, STYLE, MAX_LEN, SOS = 20, 32, 8, 8, 1


class Seq2seq(nn.Module):
    def __init__(self, dropout_p=0.3):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, HIDDEN)
        self.encoder = nn.GRU(HIDDEN, HIDDEN, batch_first=True)
        self.style_emb = nn.Embedding(2, STYLE)
        self.decoder = nn.GRU(HIDDEN, HIDDEN + STYLE, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)
        self.out = nn.Linear(HIDDEN + STYLE, VOCAB)

    def forward(self, inputs, teacher_forcing_ratio=0.5):
        tf_ratio = teacher_forcing_ratio if self.training else 0
        _, hidden = self.encoder(self.embedding(inputs["brk_sentence"]))
        hidden = torch.cat([hidden, self.style_emb(inputs["style"]).unsqueeze(0)], dim=-1)
        token = torch.full((inputs["sentence"].size(0), 1), SOS)
        log_probs, sequence = [], []
        for step in range(MAX_LEN):
            output, hidden = self.decoder(self.dropout(self.embedding(token)), hidden)
            step_log_probs = F.log_softmax(self.out(self.dropout(output)), dim=-1)
            log_probs.append(step_log_probs)
            predicted = step_log_probs.argmax(dim=-1)
            sequence.append(predicted)
            use_gold = random.random() < tf_ratio
            token = inputs["sentence"][:, step:step + 1] if use_gold else predicted
        return torch.cat(log_probs, dim=1), {"sequence": torch.cat(sequence, dim=1)}


def make_pairs(n):
    """Content words in a fixed order; the target replaces the first slot with the style marker."""
    start = torch.randint(0, VOCAB - 3, (n, 1))
    sentence = 3 + (start + torch.arange(MAX_LEN)) % (VOCAB - 3)
    style = torch.randint(0, 2, (n,))
    brk = sentence.clone()
    brk[:, 0] = 2
    sentence[:, 0] = style
    return {"brk_sentence": brk, "sentence": sentence, "style": style}


class Evaluator:
    def predict(self, dev, net):
        net.eval()
        with torch.set_grad_enabled(False):
            _, result = net(dev)
        pred = result["sequence"]
        accuracy = (pred == dev["sentence"]).float().mean().item()
        return pred, accuracy


class Trainer:
    def train(self, train_set, dev, net, evaluator, epochs=2, batch=32):
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        reports = []
        for _ in range(epochs):
            net.train()
            for start in range(0, train_set["sentence"].size(0), batch):
                part = {k: v[start:start + batch] for k, v in train_set.items()}
                log_probs, _ = net(part)
                loss = F.nll_loss(log_probs.reshape(-1, VOCAB), part["sentence"].reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
            reports.append(evaluator.predict(dev, net))
        return reports


def main():
    net = Seq2seq()
    train_set, dev = make_pairs(256), make_pairs(64)
    evaluator = Evaluator()
    Trainer().train(train_set, dev, net, evaluator)
    print(f"net.training during predict: {net.training}")
    first, acc1 = evaluator.predict(dev, net)
    second, acc2 = evaluator.predict(dev, net)
    changed = (first != second).float().mean().item()
    print(f"identical predictions: {torch.equal(first, second)} ({changed:.3f} of the tokens differ); token accuracy {acc1:.3f} and {acc2:.3f}")
    net.eval()
    with torch.no_grad():
        free = (net(dev)[1]["sequence"] == dev["sentence"]).float().mean().item()
    print(f"free-running token accuracy: {free:.3f}")


if __name__ == "__main__":
    main()
