"""Training only the classifier with freeze_classifier=True leaves the optimizer nothing to train.

source: https://github.com/scverse/scvi-tools/pull/859
kind: bug
symptom: crash
verified: ValueError: optimizer got an empty parameter list
"""
import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, n_input, n_labels):
        super().__init__()
        self.classifier = nn.Sequential(nn.Linear(n_input, 16), nn.ReLU(), nn.Linear(16, n_labels))

    def forward(self, x):
        return torch.softmax(self.classifier(x), dim=-1)


class ClassifierTrainer:
    def __init__(self, model, freeze_classifier=False, lr=1e-3):
        self.model = model
        if freeze_classifier:
            for param in self.model.classifier.parameters():
                param.requires_grad = False  # ROOT
        params = filter(lambda p: p.requires_grad, self.model.classifier.parameters())
        self.optimizer = torch.optim.Adam(params, lr=lr, eps=0.01)  # SYMPTOM

    def train(self, x, y, n_epochs=3):
        for _ in range(n_epochs):
            self.optimizer.zero_grad()
            loss = nn.functional.nll_loss(torch.log(self.model(x)), y)
            loss.backward()
            self.optimizer.step()


torch.manual_seed(0)
trainer = ClassifierTrainer(Classifier(10, 3), freeze_classifier=True)
trainer.train(torch.randn(16, 10), torch.randint(0, 3, (16,)))
