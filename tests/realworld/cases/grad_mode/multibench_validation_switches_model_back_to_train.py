"""MultiBench's supervised `train` validates after every epoch: it calls `model.eval()`, then, a few lines later inside the validation block, `model.train()` again, so the validation forward passes run in training mode. Dropout stays active, so the validation loss and accuracy used for early stopping and for choosing the checkpoint to save are noisy, and every BatchNorm layer updates its running statistics from the validation batches; nothing fails. The fix removed the `model.train()` call from the validation block.

source: https://github.com/pliang279/MultiBench/issues/26
kind: bug
symptom: silent
verified: in epoch 0 the validation loss is 0.6492 while the same weights in eval mode score 0.6068, and validation moves the fusion BatchNorm running mean by 0.107; in the look-alike the two losses are equal (0.6068 and 0.6068) and validation moves it by 0
"""
import copy

import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)


class MMDL(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoders = nn.ModuleList([nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Dropout(0.3)),
                                       nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3))])
        self.fusion_norm = nn.BatchNorm1d(32)
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(32, 2))

    def forward(self, inputs):
        reps = [enc(x) for enc, x in zip(self.encoders, inputs)]
        return self.head(self.fusion_norm(torch.cat(reps, dim=1)))


def make_data(n, shift=0.0):
    a, b = torch.randn(n, 10) + shift, torch.randn(n, 6) + shift
    y = ((a[:, 0] + b[:, 0]) > 2 * shift).long()
    return [(a[i:i + 32], b[i:i + 32], y[i:i + 32]) for i in range(0, n, 32)]


def validate(model, objective, valid_dataloader):
    total, count = 0.0, 0
    for j in valid_dataloader:
        out = model([j[0], j[1]])
        total += objective(out, j[-1]).item() * len(j[-1])
        count += len(j[-1])
    return total / count


def train(model, train_dataloader, valid_dataloader, total_epochs, objective=nn.CrossEntropyLoss(), lr=1e-3):
    op = torch.optim.RMSprop(model.parameters(), lr=lr)
    for epoch in range(total_epochs):
        model.train()
        for j in train_dataloader:
            op.zero_grad()
            loss = objective(model([j[0], j[1]]), j[-1])
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 8)
            op.step()
        model.eval()
        with torch.no_grad():
            model.train()  # ROOT
            reference = copy.deepcopy(model).eval()  # read-only probe: the same weights in eval mode
            stats_before = model.fusion_norm.running_mean.clone()
            valloss = validate(model, objective, valid_dataloader)
            moved = (model.fusion_norm.running_mean - stats_before).abs().max().item()
            eval_loss = validate(reference, objective, valid_dataloader)
        print(f"epoch {epoch}: valid loss {valloss:.4f}, eval-mode loss of the same weights {eval_loss:.4f}; "
              f"validation moved the BatchNorm running mean by {moved:.3g}")


model = MMDL()
train(model, make_data(512), make_data(128, shift=0.5), total_epochs=3)
