"""lightning-bolts LogisticRegression computes its loss as nll_loss(log_softmax(softmax(linear(x)))): the softmax is applied twice, squashing the logits into [0, 1] before the cross-entropy.

source: https://github.com/Lightning-Universe/lightning-bolts/issues/654
kind: bug
symptom: silent
verified: with 10 classes the loss cannot fall below 1.46 (softmax of a one-hot probability vector) even for a perfectly separated batch; after 200 Adam steps (lr 1e-2) on a separable problem the loss is 1.56 against 0.0027 with nll_loss(log_softmax(linear(x)))
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LogisticRegression(nn.Module):
    def __init__(self, input_dim, num_classes, bias=True, learning_rate=1e-4):
        super().__init__()
        self.linear = nn.Linear(in_features=input_dim, out_features=num_classes, bias=bias)
        self.learning_rate = learning_rate

    def forward(self, x):
        x = self.linear(x)
        y_hat = F.softmax(x, dim=-1)
        return y_hat

    def training_step(self, batch, batch_idx):
        x, y = batch
        x = x.view(x.size(0), -1)
        y_hat = self.linear(x)
        loss = F.cross_entropy(F.softmax(y_hat, dim=-1), y, reduction="sum")  # ROOT
        return loss / x.size(0)


torch.manual_seed(0)
model = LogisticRegression(input_dim=16, num_classes=10, learning_rate=1e-2)
optimizer = torch.optim.Adam(model.parameters(), lr=model.learning_rate)
centers = torch.randn(10, 16) * 3
y = torch.randint(0, 10, (256,))
x = centers[y] + 0.1 * torch.randn(256, 16)
for batch_idx in range(200):
    loss = model.training_step((x, y), batch_idx)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
