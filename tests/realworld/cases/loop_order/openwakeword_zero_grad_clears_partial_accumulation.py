"""openWakeWord zeroes the gradients at the top of every batch, so batches counted toward the 128-sample step are dropped.

source: https://github.com/dscripka/openWakeWord/issues/316
kind: bug
symptom: silent
verified: each step sees only the 4th batch of 32 samples (first-layer grad norm 0.36) instead of the 128 accumulated samples (0.70, max abs difference 0.043)
"""
import torch
import torch.nn as nn


class Model:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(96, 64), nn.ReLU(), nn.Linear(64, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-4)
        self.loss = nn.BCEWithLogitsLoss()

    def train_model(self, X):
        accumulated_samples = 0
        for step_ndx, (data, labels) in enumerate(X):
            self.optimizer.zero_grad()  # ROOT
            predictions = self.model(data).squeeze(-1)
            loss = self.loss(predictions, labels)
            loss.backward()
            accumulated_samples += data.shape[0]
            if accumulated_samples >= 128:
                self.last_grad = self.model[0].weight.grad.clone()
                self.optimizer.step()
                accumulated_samples = 0


torch.manual_seed(0)
X = [(torch.randn(32, 96), (torch.rand(32) > 0.5).float()) for _ in range(8)]
oww = Model()
oww.train_model(X)
