"""DeepXDE's PDEOperatorCartesianProd._losses averages each loss term over the functions with bkd.reduce_mean(bkd.as_tensor(l)): with the PyTorch backend as_tensor is torch.as_tensor, which copies the per-function loss tensors of the tuple into a new tensor without a graph, so the physics-informed DeepONet's total loss does not require grad and the first backward fails.

source: https://github.com/lululxvi/deepxde/pull/1379
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import types

import numpy as np
import torch

bkd = types.SimpleNamespace(  # deepxde.backend with the pytorch backend
    as_tensor=lambda data, dtype=None: data if isinstance(data, torch.Tensor) else torch.as_tensor(data, dtype=dtype),
    zeros_like=torch.zeros_like, reduce_mean=torch.mean, stack=torch.stack)


class DeepONetCartesianProd(torch.nn.Module):
    def __init__(self, m, p=16):
        super().__init__()
        self.branch = torch.nn.Sequential(torch.nn.Linear(m, 32), torch.nn.Tanh(), torch.nn.Linear(32, p))
        self.trunk = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, p))
        self.b = torch.nn.Parameter(torch.tensor(0.0))
        self.auxiliary_vars = None

    def forward(self, inputs):
        x_func, x_loc = inputs
        return torch.einsum("bi,ni->bn", self.branch(x_func), torch.tanh(self.trunk(x_loc))) + self.b


def pde(x, y, v):  # -u_xx = v on [0, 1]
    dy_x = torch.autograd.grad(y, x, torch.ones_like(y), create_graph=True)[0]
    dy_xx = torch.autograd.grad(dy_x, x, torch.ones_like(dy_x), create_graph=True)[0]
    return -dy_xx - v


class PDEOperatorCartesianProd:  # one PDE residual and a zero Dirichlet condition on the two boundary points
    num_bcs = [2]

    def _losses(self, outputs, loss_fn, inputs, model, num_func):
        bcs_start = np.cumsum([0] + self.num_bcs)
        losses = []
        for i in range(num_func):
            out = outputs[i][:, None]
            f = [pde(inputs[1], out, model.net.auxiliary_vars[i][:, None])]
            error_f = [fi[bcs_start[-1]:] for fi in f]
            losses_i = [loss_fn(bkd.zeros_like(error), error) for error in error_f]
            error = out[bcs_start[0]:bcs_start[1]]
            losses_i.append(loss_fn(bkd.zeros_like(error), error))
            losses.append(losses_i)

        losses = zip(*losses)
        losses = [bkd.reduce_mean(bkd.as_tensor(l)) for l in losses]  # ROOT
        return losses


torch.manual_seed(0)
x_loc = torch.cat([torch.tensor([[0.0], [1.0]]), torch.rand(30, 1)])
func_vals = torch.randn(8, 20)
aux = torch.sin(3 * x_loc.T + func_vals[:, :1])  # the source term v at the 32 points, per function
net = DeepONetCartesianProd(20)
net.auxiliary_vars = aux
model = types.SimpleNamespace(net=net)
data = PDEOperatorCartesianProd()
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
for step in range(5):
    inputs = (func_vals, x_loc.clone().requires_grad_())
    outputs_ = net(inputs)
    losses = torch.stack(data._losses(outputs_, torch.nn.MSELoss(), inputs, model, len(func_vals)))
    total_loss = torch.sum(losses)
    opt.zero_grad()
    total_loss.backward()  # SYMPTOM
    opt.step()
    print("step", step, "losses", [round(l, 4) for l in losses.tolist()])
