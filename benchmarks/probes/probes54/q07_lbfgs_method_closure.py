import torch
import torch.nn as nn


class Calibrator:
    def __init__(self, n_classes):
        self.log_t = nn.Parameter(torch.zeros(1))
        self.bias = nn.Parameter(torch.zeros(n_classes))
        self.opt = torch.optim.LBFGS([self.log_t, self.bias], lr=0.1, max_iter=20)
        self.nll = nn.CrossEntropyLoss()

    def _objective(self, logits, labels):
        def closure():
            scaled = logits / self.log_t.exp() + self.bias
            loss = self.nll(scaled, labels)
            loss.backward()  # ROOT
            return loss
        return closure

    def fit(self, logits, labels):
        self.opt.step(self._objective(logits, labels))
        return self.log_t.exp().item()


cal = Calibrator(3)
logits, labels = torch.randn(64, 3) * 3, torch.randint(0, 3, (64,))
print("T =", cal.fit(logits, labels), "grad after fit:", cal.log_t.grad)
