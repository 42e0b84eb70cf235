"""Synaptic-Flow's multishot experiment after "Fixed bug of not properly resetting parameters during multishot pruning": the rewind keeps the saved entries whose names end with `.weight` or `.bias` (not the masks), so each level's `load_state_dict` restores the initial weights while the pruning masks stay.

source: https://github.com/ganguli-lab/Synaptic-Flow/commit/4f834fdd0901563378a61c1dedd15c715ad7b421
kind: lookalike
"""
import os
import tempfile

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class MaskedLinear(nn.Linear):
    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features)
        self.register_buffer('weight_mask', torch.ones(self.weight.shape))

    def forward(self, x):
        return F.linear(x, self.weight_mask * self.weight, self.bias)


def masked_parameters(model):
    for module in model.modules():
        if isinstance(module, MaskedLinear):
            yield module.weight_mask, module.weight


class Mag:
    def __init__(self, masked_parameters):
        self.masked_parameters = list(masked_parameters)

    def prune(self, sparsity):
        scores = torch.cat([(m * p).detach().abs().flatten() for m, p in self.masked_parameters])
        k = int((1.0 - sparsity) * scores.numel())
        threshold = scores.kthvalue(k).values
        for mask, param in self.masked_parameters:
            mask.copy_(((mask * param).detach().abs() > threshold).float())


def train_eval_loop(model, loss, optimizer, data, epochs):
    for _ in range(epochs):
        for x, y in data:
            optimizer.zero_grad()
            loss(model(x), y).backward()
            optimizer.step()


result_dir = tempfile.mkdtemp()
model = nn.Sequential(MaskedLinear(20, 64), nn.ReLU(), MaskedLinear(64, 5))
loss = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
data = [(torch.randn(32, 20), torch.randint(0, 5, (32,))) for _ in range(4)]
torch.save(model.state_dict(), "{}/model.pt".format(result_dir))
torch.save(optimizer.state_dict(), "{}/optimizer.pt".format(result_dir))

level = 2
for l in range(level):
    train_eval_loop(model, loss, optimizer, data, 2)
    pruner = Mag(masked_parameters(model))
    sparsity = (10 ** (-1.0)) ** ((l + 1) / level)
    pruner.prune(sparsity)

    # Reset Model's Weights
    original_dict = torch.load("{}/model.pt".format(result_dir))
    original_weights = dict(filter(lambda v: (v[0].endswith(('.weight', '.bias'))), original_dict.items()))
    model_dict = model.state_dict()
    model_dict.update(original_weights)
    model.load_state_dict(model_dict)
    optimizer.load_state_dict(torch.load("{}/optimizer.pt".format(result_dir)))

    rewound = torch.equal(model[0].weight, original_dict['0.weight'])
    print(f"level {l}: sparsity {sparsity:.3f}  entries kept {len(original_weights)} of {len(original_dict)}  rewound: {rewound}")

train_eval_loop(model, loss, optimizer, data, 2)
