"""torchbearer's RocAucScore with the metric lambda calling y_pred.detach().cpu().numpy(): the stored training predictions still hold their graphs until the epoch ends, but the conversion to numpy is allowed and the metric is computed.

source: https://github.com/pytorchbearer/torchbearer/issues/424
kind: lookalike
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def roc_auc_score(y_true, y_score):
    """Cut-down sklearn.metrics.roc_auc_score for binary labels (rank statistic)."""
    order = np.argsort(y_score)
    ranks = np.empty(len(y_score))
    ranks[order] = np.arange(1, len(y_score) + 1)
    pos = y_true == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class EpochLambda:
    def __init__(self, name, metric_function):
        self.name, self._metric_function = name, metric_function
        self._y_true, self._y_pred = [], []

    def reset(self):
        self._y_true, self._y_pred = [], []

    def process(self, y_pred, y_true):
        self._y_pred.append(y_pred)
        self._y_true.append(y_true)

    def process_final(self):
        return self._metric_function(torch.cat(self._y_pred), torch.cat(self._y_true))


class RocAucScore(EpochLambda):
    def __init__(self):
        super().__init__('roc_auc_score', lambda y_pred, y_true: roc_auc_score(
            y_true.cpu().numpy(), y_pred.detach().cpu().numpy()))


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
metric = RocAucScore()
for epoch in range(2):
    metric.reset()
    for batch in range(5):
        x = torch.randn(16, 8)
        y_true = (x[:, 0] > 0).long()
        y_pred = torch.sigmoid(model(x)).squeeze(1)
        loss = F.binary_cross_entropy(y_pred, y_true.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metric.process(y_pred, y_true)
    print(epoch, metric.name, metric.process_final())
