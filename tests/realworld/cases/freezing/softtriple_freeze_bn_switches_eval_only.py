"""SoftTriple --freeze_BN: the BatchNorm layers are put in eval mode each epoch, but their weight and bias still train.

source: https://github.com/idstcv/SoftTriple/issues/4
kind: bug
symptom: silent
verified: model[1].weight changes although freeze_BN is set (only the running stats are frozen)
"""
import argparse
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parameter import Parameter


class SoftTriple(nn.Module):
    def __init__(self, la, gamma, tau, margin, dim, cN, K):
        super(SoftTriple, self).__init__()
        self.la, self.gamma, self.tau, self.margin, self.cN, self.K = la, 1. / gamma, tau, margin, cN, K
        self.fc = Parameter(torch.Tensor(dim, cN * K))
        nn.init.kaiming_uniform_(self.fc, a=math.sqrt(5))

    def forward(self, input, target):
        centers = F.normalize(self.fc, p=2, dim=0)
        simInd = input.matmul(centers)
        simStruc = simInd.reshape(-1, self.cN, self.K)
        prob = F.softmax(simStruc * self.gamma, dim=2)
        simClass = torch.sum(prob * simStruc, dim=2)
        marginM = torch.zeros(simClass.shape)
        marginM[torch.arange(0, marginM.shape[0]), target] = self.margin
        return F.cross_entropy(self.la * (simClass - marginM), target)


def train(train_loader, model, criterion, optimizer, args):
    model.train()
    if args.freeze_BN:
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.eval()  # ROOT
    for input, target in train_loader:
        output = F.normalize(model(input), p=2, dim=1)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


torch.manual_seed(0)
args = argparse.Namespace(freeze_BN=True, modellr=1e-2, centerlr=1e-2, eps=1e-2, weight_decay=1e-4)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 16))
criterion = SoftTriple(la=20, gamma=0.1, tau=0.2, margin=0.01, dim=16, cN=4, K=3)
optimizer = torch.optim.Adam([{"params": model.parameters(), "lr": args.modellr},
                              {"params": criterion.parameters(), "lr": args.centerlr}],
                             eps=args.eps, weight_decay=args.weight_decay)
train_loader = [(torch.rand(8, 3, 8, 8), torch.randint(0, 4, (8,))) for _ in range(3)]
for epoch in range(2):
    train(train_loader, model, criterion, optimizer, args)
