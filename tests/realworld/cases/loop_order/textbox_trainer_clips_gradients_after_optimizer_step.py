"""TextBox's `Trainer._train_epoch` calls `optimizer.step()` before `clip_grad_norm_(model.parameters(), grad_clip)`: the step uses the unclipped gradients and the clipping only rescales gradients that are zeroed at the start of the next batch, so `grad_clip` never limits an update (a large-gradient batch moves the weights by the full unclipped step).

source: https://github.com/RUCAIBox/TextBox/commit/fe37131f4247377ab12b97678a3331273f1a1555
kind: bug
symptom: silent
verified: with grad_clip=0.1 and SGD lr=0.5 every step moves the weights by 2.7-4.4 (lr x the unclipped gradient norm) instead of at most 0.050; the look-alike's update norms are all 0.050
"""
import torch
from torch import nn

torch.manual_seed(0)
VOCAB, EMB, HIDDEN = 40, 16, 32


class Seq2SeqLM(nn.Module):
    """Stands in for a TextBox model: `forward(data, epoch_idx)` returns the training loss."""

    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, EMB)
        self.encoder = nn.GRU(EMB, HIDDEN, batch_first=True)
        self.decoder = nn.GRU(EMB, HIDDEN, batch_first=True)
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, data, epoch_idx=0):
        _, h = self.encoder(self.embedding(data['source']))
        dec, _ = self.decoder(self.embedding(data['target'][:, :-1]), h)
        logits = self.out(dec)
        return 20.0 * nn.functional.cross_entropy(logits.reshape(-1, VOCAB), data['target'][:, 1:].reshape(-1))


class Trainer:
    def __init__(self, model, grad_clip=0.1, learning_rate=0.5):
        self.model = model
        self.grad_clip = grad_clip
        self.optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
        self.update_norms = []

    def _train_epoch(self, train_data, epoch_idx):
        self.model.train()
        for data in train_data:
            self.optimizer.zero_grad()
            loss = self.model(data, epoch_idx=epoch_idx)
            before = torch.cat([p.detach().flatten() for p in self.model.parameters()])
            loss.backward()
            self.optimizer.step()  # ROOT
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
            after = torch.cat([p.detach().flatten() for p in self.model.parameters()])
            self.update_norms.append((after - before).norm().item())


train_data = [{'source': torch.randint(0, VOCAB, (8, 10)), 'target': torch.randint(0, VOCAB, (8, 9))}
              for _ in range(4)]
trainer = Trainer(Seq2SeqLM())
for epoch_idx in range(2):
    trainer._train_epoch(train_data, epoch_idx)
print("update norms:", " ".join(f"{n:.3f}" for n in trainer.update_norms))
print(f"largest update {max(trainer.update_norms):.3f} (lr x grad_clip = {0.5 * trainer.grad_clip:.3f})")
