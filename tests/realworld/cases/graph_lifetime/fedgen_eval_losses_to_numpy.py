"""Federated server evaluation: user test losses with a graph are summed through numpy.

source: https://github.com/zhuangdizhu/FedGen/issues/1
kind: bug
symptom: crash
verified: RuntimeError: Can't call numpy() on Tensor that requires grad.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


class User:
    def __init__(self):
        self.model = nn.Linear(6, 3)
        self.loss = nn.CrossEntropyLoss()
        self.test_data = (torch.randn(5, 6), torch.randint(0, 3, (5,)))

    def test(self):
        self.model.eval()
        X, y = self.test_data
        output = self.model(X)
        test_acc = (output.argmax(1) == y).sum().item()
        return test_acc, self.loss(output, y), y.shape[0]  # ROOT


users = [User() for _ in range(3)]
stats = [u.test() for u in users]
test_samples = [s[2] for s in stats]
test_losses = [s[1] for s in stats]
glob_loss = np.sum([x * y for (x, y) in zip(test_samples, test_losses)]).item() / np.sum(
    test_samples)  # SYMPTOM
print(glob_loss)
