"""ArcFace training passes both the backbone and the separate metric_fc head to one optimizer as two groups.

source: https://github.com/ronghuaiyang/arcface-pytorch/issues/20
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ArcMarginProduct(nn.Module):
    def __init__(self, in_features, out_features, s=30.0):
        super().__init__()
        self.s = s
        self.weight = nn.Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, input, label):
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        return cosine * self.s


class opt:
    lr = 1e-2
    weight_decay = 5e-4


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 8), nn.PReLU())
metric_fc = ArcMarginProduct(8, 4)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                             lr=opt.lr, weight_decay=opt.weight_decay)
data_input, label = torch.randn(16, 10), torch.randint(0, 4, (16,))
for i in range(5):
    feature = model(data_input)
    output = metric_fc(feature, label)
    loss = criterion(output, label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
