"""The value-and-derivative fit of the thread with create_graph=True: grad_x is part of the graph, so loss_z (the derivative-matching term) backpropagates into the network's weights next to loss_y.

source: https://github.com/pytorch/pytorch/issues/31984
kind: lookalike
"""
import torch
from torch import nn
from torch.autograd import grad


class net(nn.Module):
    def __init__(self):
        super(net, self).__init__()
        self.lin1 = nn.Linear(3, 30)
        self.lin2 = nn.Linear(30, 1)

    def forward(self, p):
        x = self.lin1(p)
        x = nn.ReLU()(x)
        return self.lin2(x)


torch.manual_seed(0)
x = torch.randn(200, 3)
y = (5 * torch.sin(x) + 3 * torch.cos(x)).sum(dim=-1).unsqueeze(-1)
z = (5 * torch.cos(x) - 3 * torch.sin(x)).sum(dim=-1).unsqueeze(-1)
model = net()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

for epoch in range(60):
    model.train()
    x.requires_grad = True
    optimizer.zero_grad()
    output = model(x)
    grad_x = grad(output.sum(), x, create_graph=True)[0]
    loss_y = nn.MSELoss()(output, y)
    loss_z = nn.MSELoss()(grad_x.sum(dim=-1).unsqueeze(-1), z)
    loss = loss_y + loss_z
    if epoch == 0:
        print("loss_z.grad_fn", loss_z.grad_fn, "loss_z", loss_z.item())
        g_y = torch.autograd.grad(loss_y, model.lin1.weight, retain_graph=True)[0]
        g_all = torch.autograd.grad(loss, model.lin1.weight, retain_graph=True)[0]
        print("gradient difference from loss_z", (g_all - g_y).abs().max().item())
    loss.backward(retain_graph=True)
    optimizer.step()
print('Loss_y = {:.4f} | Loss_z = {:.4f}.'.format(loss_y.item(), loss_z.item()))
