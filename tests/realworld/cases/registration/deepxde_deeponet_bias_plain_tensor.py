"""DeepXDE's PyTorch DeepONet creates its output bias as `self.b = torch.tensor(0.0, requires_grad=True)`; a plain tensor attribute is not registered by `nn.Module`, so `net.parameters()` (which the model hands to the optimizer) leaves it out and the bias stays at zero for the whole training while the branch and trunk nets train, with no error.

source: https://github.com/lululxvi/deepxde/pull/1023
kind: bug
symptom: silent
verified: after 100 Adam steps on an operator whose outputs carry a constant offset of 3, `net.b` is still exactly 0.0 although `net.b.grad` is non-zero, and `b` is missing from `net.named_parameters()`; in the look-alike (`torch.nn.parameter.Parameter`) `b` is a registered parameter and Adam moves it (0.082 after the same 100 steps)
"""
import torch
import torch.nn as nn


class FNN(nn.Module):
    def __init__(self, layer_sizes, activation):
        super().__init__()
        self.activation = activation
        self.linears = nn.ModuleList()
        for i in range(1, len(layer_sizes)):
            self.linears.append(nn.Linear(layer_sizes[i - 1], layer_sizes[i]))
            nn.init.xavier_normal_(self.linears[-1].weight)
            nn.init.zeros_(self.linears[-1].bias)

    def forward(self, x):
        for linear in self.linears[:-1]:
            x = self.activation(linear(x))
        return self.linears[-1](x)


class DeepONet(nn.Module):
    def __init__(self, layer_sizes_branch, layer_sizes_trunk, activation):
        super().__init__()
        self.activation_trunk = activation
        self.branch = FNN(layer_sizes_branch, activation)
        self.trunk = FNN(layer_sizes_trunk, self.activation_trunk)
        self.b = torch.tensor(0.0, requires_grad=True)  # ROOT

    def forward(self, inputs):
        x_func = inputs[0]
        x_loc = inputs[1]
        x_func = self.branch(x_func)
        x_loc = self.activation_trunk(self.trunk(x_loc))
        x = torch.einsum("bi,bi->b", x_func, x_loc)
        x = torch.unsqueeze(x, 1)
        x = x + self.b
        return x


class Model:
    def __init__(self, net):
        self.net = net

    def compile(self, lr):
        self.opt = torch.optim.Adam(self.net.parameters(), lr=lr)

    def train(self, iterations, data):
        (u, y), target = data
        for i in range(iterations):
            self.opt.zero_grad()
            loss = torch.mean((self.net((u, y)) - target) ** 2)
            loss.backward()
            self.opt.step()
        return loss.item()


torch.manual_seed(0)
m = 20
sensors = torch.linspace(0, 1, m)
coef = torch.randn(64, 1)
u = torch.sin(3.0 * coef * sensors)  # input functions sampled at the sensors
y = torch.rand(64, 1)  # query locations
target = (1 - torch.cos(3.0 * coef * y)) / (3.0 * coef) + 3.0  # antiderivative plus a constant offset

net = DeepONet([m, 16, 16], [1, 16, 16], torch.tanh)
model = Model(net)
model.compile(lr=1e-3)
loss = model.train(100, ((u, y), target))
print("loss %.4f" % loss, "b = %.4f" % float(net.b.detach()), [n for n, _ in net.named_parameters()][-2:])
