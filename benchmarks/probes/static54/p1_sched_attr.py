import torch
import torch.nn.functional as F


class Trainer:
    def __init__(self, model):
        self.model = model
        self.sched = None

    def fit(self, loader):
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        for x, y in loader:
            opt.zero_grad()
            F.mse_loss(self.model(x), y).backward()
            self.sched.step()  # ROOT


m = torch.nn.Linear(3, 1)
w0 = m.weight.detach().clone()
Trainer(m).fit([(torch.randn(4, 3), torch.randn(4, 1))] * 3)
print("moved", not torch.equal(w0, m.weight))
