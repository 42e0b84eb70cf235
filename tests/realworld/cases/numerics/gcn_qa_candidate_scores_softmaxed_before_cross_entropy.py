"""Transformer-GCN-QA puts a softmax on the candidate scores of its output layer, then trains with CrossEntropyLoss.

source: https://github.com/bowang-lab/Transformer-GCN-QA/pull/32
kind: bug
symptom: silent
verified: after 200 Adam steps the loss is stuck at 1.462, the log(1+9/e) floor for 10 candidates; without the softmax it reaches 0.0033
"""
import torch
import torch.nn as nn


class TransformerGCNQA(nn.Module):
    def __init__(self, n_rgcn_layers=2, hidden=32):
        super().__init__()
        self.rgcn_layers = nn.ModuleList([nn.Linear(hidden, hidden) for _ in range(n_rgcn_layers)])
        self.fc_1 = nn.Linear(hidden * 2, 64)
        self.fc_2 = nn.Linear(64, 1)

    def forward(self, query, candidate_encodings, adj):
        x = candidate_encodings
        for layer in self.rgcn_layers:
            x = torch.relu(adj @ layer(x))
        x = torch.cat([x, query.expand(x.shape[0], -1)], dim=-1)
        x = self.fc_2(torch.relu(self.fc_1(x))).squeeze(-1)
        x = torch.softmax(x, dim=-1)  # ROOT
        return x


torch.manual_seed(0)
model = TransformerGCNQA()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
query, candidates = torch.randn(1, 32), torch.randn(10, 32)
adj = torch.softmax(torch.randn(10, 10), dim=1)
target = torch.tensor([3])
for step in range(200):
    pred = model(query, candidates, adj).unsqueeze(0)
    loss = criterion(pred, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
