import torch
import torch.nn as nn


class PINN:
    def __init__(self, n=32):
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        self.x = torch.linspace(0, 1, n).unsqueeze(1).requires_grad_(True)
        self.optimizer = torch.optim.LBFGS(self.net.parameters(), lr=1.0, max_iter=50,
                                           line_search_fn="strong_wolfe")
        self.iter = 0

    def loss_pinn(self):
        self.optimizer.zero_grad()
        u = self.net(self.x)
        du = torch.autograd.grad(u, self.x, torch.ones_like(u), create_graph=True)[0]
        loss = ((du - torch.cos(self.x)) ** 2).mean() + (u[0] ** 2).sum()
        loss.backward()  # ROOT
        self.iter += 1
        return loss

    def train(self):
        self.net.train()
        self.optimizer.step(self.loss_pinn)


m = PINN()
m.train()
u = m.net(m.x)
print("err", (u - torch.sin(m.x)).abs().max().item())
