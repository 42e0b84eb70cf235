"""The evaluation loop with validation run inside a torch.no_grad() block (and model.train() in a finally clause): when a validation step raises, grad mode is restored on the way out and the next fit trains.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/2180
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitMNIST(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_1 = nn.Linear(28 * 28, 64)
        self.layer_2 = nn.Linear(64, 10)
        self.fail_validation = True

    def forward(self, x):
        return self.layer_2(F.relu(self.layer_1(x.view(x.size(0), -1))))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        assert not self.fail_validation, "bug in validation_step"
        return F.cross_entropy(self(x), y)


class Trainer:
    """The evaluation loop of PyTorch Lightning 0.8, cut down."""

    def run_evaluation(self, model, val_batches):
        model.eval()
        try:
            # disable gradients to save memory, restored even if a validation step raises
            with torch.no_grad():
                return [model.validation_step(batch, i) for i, batch in enumerate(val_batches)]
        finally:
            model.train()

    def fit(self, model, train_batches, val_batches):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for i, batch in enumerate(train_batches):
            loss = model.training_step(batch, i)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        self.run_evaluation(model, val_batches)  # end of the epoch
        return loss


torch.manual_seed(0)
batches = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(4)]
model, trainer = LitMNIST(), Trainer()
try:
    trainer.fit(model, batches, batches)  # first notebook run: validation_step raises
except AssertionError as e:
    print("first run failed:", e)
model.fail_validation = False  # the user fixes validation_step and runs the cell again
loss = trainer.fit(model, batches, batches)
print(loss.item())
