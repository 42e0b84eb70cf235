"""FairMOT re-id head: the identity classifier lives in the loss module and is missing from the optimizer.

source: https://github.com/ifzhang/FairMOT/issues/125
kind: bug
symptom: silent
verified: loss_fn.classifier.weight receives gradients but never changes
"""
import torch
import torch.nn as nn


class DLASeg(nn.Module):
    def __init__(self, emb_dim=8):
        super().__init__()
        self.base = nn.Conv2d(3, 8, 3, padding=1)
        self.id_head = nn.Conv2d(8, emb_dim, 1)

    def forward(self, x):
        return self.id_head(torch.relu(self.base(x)))


class MotLoss(nn.Module):
    def __init__(self, emb_dim=8, nID=5):
        super().__init__()
        self.emb_dim, self.nID = emb_dim, nID
        self.classifier = nn.Linear(self.emb_dim, self.nID)
        self.IDLoss = nn.CrossEntropyLoss()

    def forward(self, id_head, ids):
        id_output = id_head.mean((2, 3))
        return self.IDLoss(self.classifier(id_output), ids)


torch.manual_seed(0)
model = DLASeg()
loss_fn = MotLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # ROOT
imgs, ids = torch.randn(4, 3, 8, 8), torch.tensor([0, 1, 2, 3])
for epoch in range(5):
    loss = loss_fn(model(imgs), ids)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
