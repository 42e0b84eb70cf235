"""Determined PyTorchTrial: evaluate_batch fits a PyGCL LREvaluator (a logistic-regression probe trained with its own optimizer and loss.backward()) on the embeddings, but the harness runs evaluate_batch under torch.no_grad(), so the probe's loss has no graph.

source: https://github.com/determined-ai/determined/issues/7043
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LREvaluator:
    def __init__(self, num_epochs=20, learning_rate=0.01):
        self.num_epochs = num_epochs
        self.learning_rate = learning_rate

    def __call__(self, x, y, split):
        return self.evaluate(x, y, split)

    def evaluate(self, x, y, split):
        x = x.detach()
        classifier = nn.Linear(x.size(1), int(y.max()) + 1)
        optimizer = torch.optim.Adam(classifier.parameters(), lr=self.learning_rate)
        for epoch in range(self.num_epochs):
            classifier.train()
            optimizer.zero_grad()
            loss = F.cross_entropy(classifier(x[split['train']]), y[split['train']])
            loss.backward()  # SYMPTOM
            optimizer.step()
        pred = classifier(x[split['test']]).argmax(-1)
        return {"micro_f1": (pred == y[split['test']]).float().mean().item()}


class GRACETrial:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
        self.split = {'train': torch.arange(0, 40), 'test': torch.arange(40, 50)}

    def evaluate_batch(self, batch):
        z = self.model(batch['x'])
        result = LREvaluator()(z, batch['y'], self.split)  # ROOT
        return {"micro_f1": result["micro_f1"]}


class PyTorchTrialController:
    def __init__(self, trial):
        self.trial = trial

    def _validate(self, batches):
        metrics = []
        with torch.no_grad():
            for batch in batches:
                metrics.append(self.trial.evaluate_batch(batch))
        return metrics


torch.manual_seed(0)
controller = PyTorchTrialController(GRACETrial())
print(controller._validate([{'x': torch.randn(50, 16), 'y': torch.randint(0, 3, (50,))}]))
