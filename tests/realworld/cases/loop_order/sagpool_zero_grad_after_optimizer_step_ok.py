"""SAGPool training loop: optimizer.zero_grad() comes after optimizer.step() at the end of each iteration instead of at the start; the gradients are still cleared between consecutive backward passes.

source: https://github.com/inyeoplee77/SAGPool/issues/15
kind: lookalike
verified: the model trains and every step uses only its own batch's gradient (grads are zero after each step)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, num_features=6, nhid=16, num_classes=3):
        super(Net, self).__init__()
        self.lin1 = nn.Linear(num_features, nhid)
        self.lin2 = nn.Linear(nhid, num_classes)

    def forward(self, x):
        return F.log_softmax(self.lin2(F.relu(self.lin1(x))), dim=-1)


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=0.0005, weight_decay=0.0001)
train_loader = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
for epoch in range(2):
    model.train()
    for i, (x, y) in enumerate(train_loader):
        out = model(x)
        loss = F.nll_loss(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        assert all(p.grad is None for p in model.parameters())
print("ok")
