"""MCAN's eval() builds a separate net from saved weights, so the training net never leaves train mode.

source: https://github.com/MILVLG/mcan-vqa/issues/26
kind: lookalike
"""
import copy
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.dropout = nn.Dropout(0.1)
        self.classifer = nn.Linear(16, 3)

    def forward(self, x):
        return self.classifer(self.dropout(torch.relu(self.fc(x))))


def eval(state_dict, dataset):
    net = Net()
    net.load_state_dict(state_dict)
    net.eval()
    with torch.no_grad():
        return sum(net(x).argmax(-1).eq(y).float().mean().item() for x, y in dataset) / len(dataset)


torch.manual_seed(0)
net = Net()
net.train()
optim = torch.optim.Adam(net.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
dataset = [(torch.randn(4, 8), torch.randint(0, 3, (4,)))] * 2
for epoch in range(3):
    for x, y in dataset:
        optim.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        optim.step()
    eval(copy.deepcopy(net.state_dict()), dataset)
