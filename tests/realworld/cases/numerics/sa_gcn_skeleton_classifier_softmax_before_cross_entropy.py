"""SA-GCN skeleton action classifier ends with a softmax and is trained with nn.CrossEntropyLoss().

source: https://github.com/PingYu-iris/SA-GCN/pull/4
kind: bug
symptom: silent
verified: after 30 Adam steps on one batch the loss is 1.866 (the floor with softmax outputs is 1.46 for 10 classes); returning the fc logits it reaches 0.020
"""
import torch
import torch.nn as nn


class SA_GCN(nn.Module):
    def __init__(self, in_channels=3, num_joints=18, num_class=10):
        super().__init__()
        self.A = nn.Parameter(torch.eye(num_joints) + 0.1, requires_grad=False)
        self.gcn = nn.Linear(in_channels, 32)
        self.tcn = nn.Conv1d(32, 32, 3, padding=1)
        self.fc = nn.Linear(32, num_class)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = torch.relu(self.gcn(torch.einsum('vw,ntwc->ntvc', self.A, x)))
        x = x.mean(dim=2).transpose(1, 2)
        x = torch.relu(self.tcn(x)).mean(dim=-1)
        return self.softmax(self.fc(x))  # ROOT


torch.manual_seed(0)
model = SA_GCN()
loss_function = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
data, label = torch.randn(8, 10, 18, 3), torch.randint(0, 10, (8,))
for epoch in range(30):
    output = model(data)
    loss = loss_function(output, label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item())
