"""A network is trained to predict a value and its derivative: grad_x = grad(output.sum(), x, retain_graph=True)[0] is taken without create_graph=True, so grad_x is a constant of the graph, loss_z (the derivative-matching term) has grad_fn None, and it adds nothing to the parameters' gradients: only loss_y trains the net.

source: https://github.com/pytorch/pytorch/issues/31984
kind: bug
symptom: silent
verified: loss_z.grad_fn is None at the first step (loss_z 106.0); the first step's lin1.weight gradient from loss_y + loss_z equals the one from loss_y alone (max difference 0.0), so the 60 Adam steps train on loss_y only and end at loss_z 78.09; with create_graph=True (the fix) loss_z has a grad_fn (MseLossBackward0), the two gradients differ by up to 2.51 and loss_z ends at 65.46
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
    grad_x = grad(output.sum(), x, retain_graph=True)[0]  # ROOT
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
