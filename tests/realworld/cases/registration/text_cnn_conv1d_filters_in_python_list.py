"""Text CNN keeps its three Conv1d filters in a Python list next to a registered Linear; the filters never train.

source: https://github.com/pytorch/pytorch/issues/1053
kind: bug
symptom: silent
verified: the optimizer holds 2 of 8 parameter tensors and after 5 SGD steps conv1d[0].weight is unchanged (max abs change 0.0); with nn.ModuleList it moves 0.0097
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

WORD_VEC_SIZE = 16


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1d = [  # ROOT
            nn.Conv1d(WORD_VEC_SIZE, 1, 3),
            nn.Conv1d(WORD_VEC_SIZE, 1, 4),
            nn.Conv1d(WORD_VEC_SIZE, 1, 5),
        ]
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        pooled = [F.relu(conv(x)).max(dim=2)[0] for conv in self.conv1d]
        return self.fc(torch.cat(pooled, dim=1))


torch.manual_seed(0)
a = Net()
optimizer = torch.optim.SGD(a.parameters(), lr=0.1)
before = a.conv1d[0].weight.detach().clone()
for step in range(5):
    x, y = torch.randn(8, WORD_VEC_SIZE, 20), torch.randint(0, 2, (8,))
    loss = F.cross_entropy(a(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("params in optimizer:", sum(len(g["params"]) for g in optimizer.param_groups))
print("conv1d[0] change:", (a.conv1d[0].weight - before).abs().max().item())
