"""MLNT meta-learning step rebinds each autograd.grad gradient to a detached copy, leaving the create_graph gradients used by fast_weights intact.

source: https://github.com/LiJunnan1992/MLNT/issues/8
kind: lookalike
"""
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, num_classes=14):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x, weights=None):
        if weights is None:
            weights = OrderedDict(self.named_parameters())
        x = F.relu(F.conv2d(x, weights['conv1.weight'], weights['conv1.bias'], padding=1))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.linear(x, weights['fc.weight'], weights['fc.bias'])


class args:
    lr, meta_lr, num_fast, perturb_ratio = 0.0008, 0.02, 2, 0.5


torch.manual_seed(0)
net, tch_net = Net(), Net()
for param in tch_net.parameters():
    param.requires_grad = False
criterion = nn.CrossEntropyLoss()
consistent_criterion = nn.KLDivLoss(reduction='batchmean')
optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-3)

inputs, targets = torch.randn(8, 3, 16, 16), torch.randint(0, 14, (8,))
optimizer.zero_grad()
outputs = net(inputs)
class_loss = criterion(outputs, targets)
class_loss.backward(retain_graph=True)
p_tch = F.softmax(tch_net(inputs), dim=1).detach()
for i in range(args.num_fast):
    targets_fast = targets.clone()
    randidx = torch.randperm(targets.size(0))[:int(targets.size(0) * args.perturb_ratio)]
    targets_fast[randidx] = torch.randint(0, 14, (len(randidx),))
    fast_loss = criterion(outputs, targets_fast)
    grads = torch.autograd.grad(fast_loss, net.parameters(), create_graph=True, retain_graph=True, only_inputs=True)
    for grad in grads:
        grad = grad.detach()
    fast_weights = OrderedDict((name, param - args.meta_lr * grad) for ((name, param), grad) in zip(net.named_parameters(), grads))
    fast_out = net.forward(inputs, fast_weights)
    logp_fast = F.log_softmax(fast_out, dim=1)
    consistent_loss = consistent_criterion(logp_fast, p_tch) if i == 0 else consistent_loss + consistent_criterion(logp_fast, p_tch)
meta_loss = consistent_loss / args.num_fast
meta_loss.backward()
optimizer.step()
print(meta_loss.item())
