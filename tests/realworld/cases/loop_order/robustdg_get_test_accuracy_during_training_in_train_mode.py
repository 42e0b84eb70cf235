"""robustdg: the per-epoch get_test_accuracy('test') called inside train() runs the BatchNorm model without self.phi.eval(), so the test accuracy logged during training uses batch statistics and updates the running statistics with validation and test data; the evaluation script (model.eval()) then gives another number.

source: https://github.com/microsoft/robustdg/issues/30
kind: bug
symptom: silent
verified: a get_test_accuracy("test") call after training reports 34.4 while phi.eval() on the same weights gives 40.6, and that call moves BatchNorm running_mean by 0.18 (max abs) toward the test data; with self.phi.eval() in get_test_accuracy the per-epoch calls leave the statistics alone and the call and phi.eval() both give 46.9
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Hybrid:
    def __init__(self, phi, opt, train_dataset, val_dataset, test_dataset):
        self.phi = phi
        self.opt = opt
        self.train_dataset = train_dataset
        self.val_dataset = val_dataset
        self.test_dataset = test_dataset

    def get_test_accuracy(self, case):
        dataset = self.val_dataset if case == 'val' else self.test_dataset
        correct, total = 0, 0
        with torch.no_grad():
            for x_e, y_e in dataset:
                out = self.phi(x_e)  # ROOT
                correct += (out.argmax(1) == y_e).sum().item()
                total += y_e.numel()
        return 100.0 * correct / total

    def train(self, epochs):
        for epoch in range(epochs):
            self.phi.train()
            for x_e, y_e in self.train_dataset:
                self.opt.zero_grad()
                loss = F.cross_entropy(self.phi(x_e), y_e)
                loss.backward()
                self.opt.step()
            self.get_test_accuracy('val')
            acc = self.get_test_accuracy('test')
        return acc


torch.manual_seed(3)
phi = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(phi.parameters(), lr=0.05)
train_dataset = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
val_dataset = [(torch.randn(32, 10) * 3 + 2, torch.randint(0, 3, (32,)))]
test_dataset = [(torch.randn(32, 10) * 3 + 2, torch.randint(0, 3, (32,)))]
method = Hybrid(phi, opt, train_dataset, val_dataset, test_dataset)
method.train(epochs=2)
stats = phi[1].running_mean.clone()
logged = method.get_test_accuracy('test')
moved = (phi[1].running_mean - stats).abs().max().item()
phi.eval()
with torch.no_grad():
    x, y = test_dataset[0]
    evaluated = 100.0 * (phi(x).argmax(1) == y).sum().item() / y.numel()
print(logged, evaluated, moved)
