"""nnue-pytorch's NNUE model zeroes the input-layer weights of its virtual (factorizer) features at construction with `weights[:, a:b] = 0.0` on self.input.weight, an in-place write into a slice of a parameter that requires grad, outside torch.no_grad(): recent PyTorch refuses it and the model cannot even be built (the merged PR wraps the loop in torch.no_grad()).

source: https://github.com/official-stockfish/nnue-pytorch/pull/75
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

L1 = 32
L2 = 8
L3 = 16


class FeatureBlock:
    def __init__(self, name, num_real_features, num_virtual_features):
        self.name = name
        self.num_real_features = num_real_features
        self.num_virtual_features = num_virtual_features
        self.num_features = num_real_features + num_virtual_features


class FeatureSet:
    def __init__(self, features):
        self.features = features
        self.num_features = sum(f.num_features for f in features)
        self.name = '+'.join(f.name for f in features)

    def get_virtual_feature_ranges(self):
        ranges = []
        offset = 0
        for feature in self.features:
            if feature.num_virtual_features:
                ranges.append((offset + feature.num_real_features, offset + feature.num_features))
            offset += feature.num_features
        return ranges


class NNUE(nn.Module):
    def __init__(self, feature_set, lambda_=1.0):
        super(NNUE, self).__init__()
        self.input = nn.Linear(feature_set.num_features, L1)
        self.feature_set = feature_set
        self.l1 = nn.Linear(2 * L1, L2)
        self.l2 = nn.Linear(L2, L3)
        self.output = nn.Linear(L3, 1)
        self.lambda_ = lambda_

        self._zero_virtual_feature_weights()

    def _zero_virtual_feature_weights(self):
        weights = self.input.weight
        for a, b in self.feature_set.get_virtual_feature_ranges():
            weights[:, a:b] = 0.0  # ROOT
        self.input.weight = nn.Parameter(weights)

    def forward(self, us, them, white, black):
        w = self.input(white)
        b = self.input(black)
        l0_ = (us * torch.cat([w, b], dim=1)) + (them * torch.cat([b, w], dim=1))
        l0_ = torch.clamp(l0_, 0.0, 1.0)
        l1_ = torch.clamp(self.l1(l0_), 0.0, 1.0)
        l2_ = torch.clamp(self.l2(l1_), 0.0, 1.0)
        return self.output(l2_)

    def step_(self, batch, optimizer):
        us, them, white, black, outcome, score = batch
        q = self(us, them, white, black)
        t = outcome
        p = (score / 600.0).sigmoid()
        pt = p * self.lambda_ + t * (1.0 - self.lambda_)
        loss = F.mse_loss(q.sigmoid(), pt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()


def random_batch(feature_set, n=16):
    us = (torch.rand(n, 1) > 0.5).float()
    white = (torch.rand(n, feature_set.num_features) > 0.9).float()
    black = (torch.rand(n, feature_set.num_features) > 0.9).float()
    return us, 1.0 - us, white, black, torch.rand(n, 1), torch.randn(n, 1) * 300


torch.manual_seed(0)
feature_set = FeatureSet([FeatureBlock("HalfKP", 64, 16)])
nnue = NNUE(feature_set)
optimizer = torch.optim.Adadelta(nnue.parameters(), lr=1.0)
for i in range(3):
    print(i, nnue.step_(random_batch(feature_set), optimizer))
