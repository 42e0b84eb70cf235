import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.float64


class Calibrator:
    def __init__(self, n):
        self.temperature = torch.ones(1, requires_grad=True).to(device, dtype)  # ROOT
        self.opt = torch.optim.LBFGS([self.temperature], lr=0.01, max_iter=5)

    def fit(self, logits, labels):
        def closure():
            self.opt.zero_grad()
            loss = F.cross_entropy(logits / self.temperature, labels)
            loss.backward()
            return loss
        self.opt.step(closure)
        return self.temperature


cal = Calibrator(3)
print(cal.fit(torch.randn(10, 3, dtype=dtype), torch.randint(0, 3, (10,))))
