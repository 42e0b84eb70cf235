"""Two-stage summarizer picks the draft tokens under torch.no_grad() and runs the refinement decoder outside it.

source: https://github.com/nayeon7lee/bert-summarization/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Summarizer(nn.Module):
    def __init__(self, vocab=40, hidden=16):
        super().__init__()
        self.encoder = nn.Embedding(vocab, hidden)
        self.draft_decoder = nn.Linear(hidden, vocab)
        self.refine_decoder = nn.Linear(2 * hidden, vocab)

    def generate_draft_output(self, src):
        enc = self.encoder(src)
        return enc, self.draft_decoder(enc)

    def generate_refinement_output(self, enc, draft_logits):
        with torch.no_grad():
            draft_ids = draft_logits.argmax(-1)
        refine_in = torch.cat([enc, self.encoder(draft_ids)], dim=-1)
        return self.refine_decoder(refine_in)


class Trainer:
    def __init__(self):
        self.model = Summarizer()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def train_one_batch(self, src, tgt):
        enc, draft_logits = self.model.generate_draft_output(src)
        refine_logits = self.model.generate_refinement_output(enc, draft_logits)
        loss1 = F.cross_entropy(draft_logits.reshape(-1, 40), tgt.reshape(-1))
        loss2 = F.cross_entropy(refine_logits.reshape(-1, 40), tgt.reshape(-1))
        loss = loss1 + loss2
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


torch.manual_seed(0)
trainer = Trainer()
for step in range(3):
    src, tgt = torch.randint(0, 40, (4, 10)), torch.randint(0, 40, (4, 10))
    print(trainer.train_one_batch(src, tgt))
print(trainer.model.refine_decoder.weight.grad is None)
