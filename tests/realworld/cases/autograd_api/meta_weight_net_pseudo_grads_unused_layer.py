"""Meta-Weight-Net pseudo update takes autograd.grad over every parameter of a net with an unused layer.

source: https://github.com/ShiYunyi/Meta-Weight-Net_Code-Optimization/issues/5
kind: bug
symptom: crash
verified: appears to not have been used in the graph
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(10, 16)
        self.fc = nn.Linear(16, 3)
        self.aux_head = nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(F.relu(self.backbone(x)))


class MetaWeightNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())

    def forward(self, loss):
        return self.net(loss)


torch.manual_seed(0)
pseudo_net, meta_net = MyNet(), MetaWeightNet()
inputs, labels = torch.randn(8, 10), torch.randint(0, 3, (8,))
pseudo_outputs = pseudo_net(inputs)
pseudo_loss_vector = F.cross_entropy(pseudo_outputs, labels, reduction='none').reshape(-1, 1)
pseudo_weight = meta_net(pseudo_loss_vector.data)
pseudo_loss = torch.mean(pseudo_weight * pseudo_loss_vector)
pseudo_grads = torch.autograd.grad(pseudo_loss, pseudo_net.parameters(), create_graph=True)  # ROOT
print(len(pseudo_grads))
