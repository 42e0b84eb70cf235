"""Node-prediction trainer applies --max-grad-norm clipping after optimizer.step(), so it never takes effect.

source: https://github.com/awslabs/graphstorm/issues/1366
kind: bug
symptom: silent
verified: trained weights are identical to a run without max_grad_norm
"""
import torch as th
import torch.nn as nn


class GSgnnNodePredictionTrainer:
    def __init__(self, model, lr=0.1):
        self.model = model
        self.optimizer = th.optim.SGD(model.parameters(), lr=lr)

    def fit(self, feats, labels, num_epochs=5, max_grad_norm=None, grad_norm_type=2.0):
        model = self.model
        for epoch in range(num_epochs):
            logits = model(feats)
            loss = nn.functional.cross_entropy(logits, labels)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if max_grad_norm is not None:
                th.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm, grad_norm_type)  # ROOT


th.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
trainer = GSgnnNodePredictionTrainer(model)
feats, labels = th.randn(20, 6) * 5, th.randint(0, 3, (20,))
trainer.fit(feats, labels, max_grad_norm=0.001)
