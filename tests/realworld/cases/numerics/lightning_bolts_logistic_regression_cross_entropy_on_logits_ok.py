"""lightning-bolts LogisticRegression with the fix: the loss is the cross-entropy of the linear layer's logits, and forward's softmax is only for predictions.

source: https://github.com/Lightning-Universe/lightning-bolts/issues/654
kind: lookalike
verified: the loss falls to 0.0027 after 200 steps
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
        loss = F.cross_entropy(y_hat, y, reduction="sum")
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
