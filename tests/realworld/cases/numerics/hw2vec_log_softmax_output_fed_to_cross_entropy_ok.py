"""Graph classifier applies F.log_softmax before nn.CrossEntropyLoss; log_softmax is idempotent, so the loss is unchanged.

source: https://github.com/AICPS/hw2vec/issues/23
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphEmbed(nn.Module):
    def __init__(self, in_dim=8, hidden=16):
        super().__init__()
        self.conv = nn.Linear(in_dim, hidden)

    def embed_graph(self, x, adj, batch):
        h = torch.relu(self.conv(adj @ x))
        return torch.stack([h[batch == b].mean(0) for b in range(int(batch.max()) + 1)]), None


class Trainer:
    def __init__(self, class_weights):
        self.model = GraphEmbed()
        self.model.mlp = nn.Linear(16, 2)
        self.loss_func = nn.CrossEntropyLoss(weight=class_weights.float())
        params = list(self.model.parameters())
        self.optimizer = torch.optim.Adam(params, lr=1e-2)

    def train_epoch_tj(self, data):
        output, _ = self.model.embed_graph(data["x"], data["adj"], data["batch"])
        output = self.model.mlp(output)
        output = F.log_softmax(output, dim=1)
        loss_train = self.loss_func(output, data["label"])
        return loss_train


torch.manual_seed(0)
trainer = Trainer(torch.tensor([1.0, 2.0]))
data = {"x": torch.randn(40, 8), "adj": torch.rand(40, 40), "batch": torch.arange(40) // 5,
        "label": torch.randint(0, 2, (8,))}
for epoch in range(20):
    trainer.optimizer.zero_grad()
    loss = trainer.train_epoch_tj(data)
    loss.backward()
    trainer.optimizer.step()
print(loss.item())
