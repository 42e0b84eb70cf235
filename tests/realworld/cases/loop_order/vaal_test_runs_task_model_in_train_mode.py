"""VAAL's Solver.test runs the VGG-BN task model without task_model.eval(), so BatchNorm and Dropout stay in training mode.

source: https://github.com/sinhasam/vaal/issues/2
kind: bug
symptom: silent
verified: two test() calls on the same test set give 6.25 and 9.375 accuracy and BatchNorm running_mean moves 0.48 on test data; with task_model.eval() both give 10.9375 and the statistics do not move
"""
import torch
import torch.nn as nn


class Solver:
    def __init__(self, test_dataloader):
        self.test_dataloader = test_dataloader

    def test(self, task_model):
        total, correct = 0, 0
        for imgs, labels in self.test_dataloader:
            with torch.no_grad():
                preds = task_model(imgs)  # ROOT
            preds = torch.argmax(preds, dim=1)
            correct += (preds == labels).sum().item()
            total += imgs.size(0)
        return correct / total * 100


torch.manual_seed(0)
task_model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                           nn.Flatten(), nn.Dropout(0.5), nn.Linear(8, 10))
optimizer = torch.optim.SGD(task_model.parameters(), lr=0.01)
for step in range(5):
    imgs, labels = torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,))
    loss = nn.functional.cross_entropy(task_model(imgs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

test_dataloader = [(torch.randn(16, 3, 8, 8) + 2.0, torch.randint(0, 10, (16,))) for _ in range(4)]
solver = Solver(test_dataloader)
mean_before = task_model[1].running_mean.clone()
acc1, acc2 = solver.test(task_model), solver.test(task_model)
print(acc1, acc2, (task_model[1].running_mean - mean_before).abs().max().item())
