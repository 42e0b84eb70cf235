"""LightningModule-style training_step computes the training accuracy under torch.no_grad(), the loss outside it.

source: https://github.com/rasbt/faster-pytorch-blog/issues/8
kind: lookalike
verified: the loss backpropagates into every weight; only the accuracy is computed without a graph
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LightningModel(nn.Module):
    def __init__(self, model, learning_rate):
        super().__init__()
        self.learning_rate = learning_rate
        self.model = model
        self.logged = {}

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        features, true_labels = batch
        logits = self(features)
        loss = F.cross_entropy(logits, true_labels)
        self.logged["train_loss"] = loss.item()
        self.model.eval()
        with torch.no_grad():
            predicted_labels = torch.argmax(self(features), dim=1)
            self.logged["train_acc"] = (predicted_labels == true_labels).float().mean().item()
        self.model.train()
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)


torch.manual_seed(0)
lit = LightningModel(nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.2), nn.ReLU(), nn.Linear(16, 3)), 1e-2)
optimizer = lit.configure_optimizers()
before = [p.detach().clone() for p in lit.parameters()]
for batch_idx in range(3):
    batch = (torch.randn(8, 6), torch.randint(0, 3, (8,)))
    optimizer.zero_grad()
    loss = lit.training_step(batch, batch_idx)
    loss.backward()
    optimizer.step()
print(lit.logged, all(not torch.equal(b, p) for b, p in zip(before, lit.parameters())))
