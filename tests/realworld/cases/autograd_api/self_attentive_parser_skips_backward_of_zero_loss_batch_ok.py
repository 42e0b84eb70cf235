"""self-attentive-parser after "Fix no-loss handling": `ChartParser.parse` still returns a constant `zeros(1)` margin loss for a sentence it already parses correctly, and `run_train` now calls `backward()` and `trainer.step()` only when the batch loss is positive, so a batch the parser gets entirely right is skipped instead of backpropagating a loss with no graph.

source: https://github.com/nikitakit/self-attentive-parser/commit/c326761dcf08ab66d066fc77009b98c6d7192c95
kind: lookalike
"""
import torch
from torch import nn

torch.manual_seed(0)

NUM_WORDS, NUM_LABELS = 12, 3


class ChartParser(nn.Module):
    """Stands in for the chart parser: a BiLSTM over words scores every (span start, label); decoding picks the best
    label per start position, with a Hamming cost added in training (loss-augmented decoding) as in the parser."""

    def __init__(self, dim=16):
        super().__init__()
        self.embed = nn.Embedding(NUM_WORDS, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.label = nn.Linear(2 * dim, NUM_LABELS)

    def parse(self, words, gold=None):
        h, _ = self.lstm(self.embed(words)[None])
        scores = self.label(h[0])
        if gold is not None:
            augmented = scores + 1.0 - nn.functional.one_hot(gold, NUM_LABELS).float()
            tree = augmented.argmax(-1)
            score = scores.gather(1, tree[:, None]).sum() + (tree != gold).sum()
            oracle_score = scores.gather(1, gold[:, None]).sum()
            correct = torch.equal(tree, gold)
            loss = torch.zeros(1) if correct else (score - oracle_score).view(1)
            return tree, loss
        return scores.argmax(-1), None


def make_sentence():
    words = torch.randint(0, NUM_WORDS, (6,))
    return words, words % NUM_LABELS


train = [make_sentence() for _ in range(24)]
parser = ChartParser()
trainer = torch.optim.Adam(parser.parameters(), lr=0.02)
batch_size = 4

for epoch in range(6):
    total = 0.0
    for start in range(0, len(train), batch_size):
        trainer.zero_grad()
        batch_losses = [parser.parse(words, gold)[1] for words, gold in train[start:start + batch_size]]
        batch_loss = sum(batch_losses) / len(batch_losses)
        batch_loss_value = batch_loss.item()
        if batch_loss_value > 0:
            batch_loss.backward()
            trainer.step()
        total += batch_loss_value
    print(f"epoch {epoch} loss {total:.3f}")
