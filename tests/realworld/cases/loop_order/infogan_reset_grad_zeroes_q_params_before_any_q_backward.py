"""wiseodd InfoGAN: reset_grad() zeroes p.grad.data for every G, D and Q parameter after the discriminator step, but the Q network's parameters have had no backward yet (D_loss does not reach them), so their .grad is still None.

source: https://github.com/wiseodd/generative-models/issues/26
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import numpy as np
import torch
import torch.nn.functional as nn
import torch.optim as optim

mb_size = 16
Z_dim = 8
X_dim = 20
h_dim = 32
c_dim = 4


def xavier_init(size):
    in_dim = size[0]
    xavier_stddev = 1. / np.sqrt(in_dim / 2.)
    return (torch.randn(*size) * xavier_stddev).requires_grad_()


Wzh = xavier_init(size=[Z_dim + c_dim, h_dim])
bzh = torch.zeros(h_dim, requires_grad=True)
Whx = xavier_init(size=[h_dim, X_dim])
bhx = torch.zeros(X_dim, requires_grad=True)


def G(z, c):
    inputs = torch.cat([z, c], 1)
    h = nn.relu(inputs @ Wzh + bzh.repeat(inputs.size(0), 1))
    return nn.sigmoid(h @ Whx + bhx.repeat(h.size(0), 1))


Wxh = xavier_init(size=[X_dim, h_dim])
bxh = torch.zeros(h_dim, requires_grad=True)
Why = xavier_init(size=[h_dim, 1])
bhy = torch.zeros(1, requires_grad=True)


def D(X):
    h = nn.relu(X @ Wxh + bxh.repeat(X.size(0), 1))
    return nn.sigmoid(h @ Why + bhy.repeat(h.size(0), 1))


Wqxh = xavier_init(size=[X_dim, h_dim])
bqxh = torch.zeros(h_dim, requires_grad=True)
Whc = xavier_init(size=[h_dim, c_dim])
bhc = torch.zeros(c_dim, requires_grad=True)


def Q(X):
    h = nn.relu(X @ Wqxh + bqxh.repeat(X.size(0), 1))
    return nn.softmax(h @ Whc + bhc.repeat(h.size(0), 1), dim=1)


G_params = [Wzh, bzh, Whx, bhx]
D_params = [Wxh, bxh, Why, bhy]
Q_params = [Wqxh, bqxh, Whc, bhc]
params = G_params + D_params + Q_params


def reset_grad():
    for p in params:
        p.grad.data.zero_()  # ROOT


def sample_c(size):
    c = np.random.multinomial(1, c_dim * [1. / c_dim], size=size)
    return torch.from_numpy(c.astype('float32'))


G_solver = optim.Adam(G_params, lr=1e-3)
D_solver = optim.Adam(D_params, lr=1e-3)
Q_solver = optim.Adam(G_params + Q_params, lr=1e-3)

torch.manual_seed(0)
np.random.seed(0)
for it in range(3):
    X = torch.rand(mb_size, X_dim)
    z = torch.randn(mb_size, Z_dim)
    c = sample_c(mb_size)

    G_sample = G(z, c)
    D_real = D(X)
    D_fake = D(G_sample)
    D_loss = -torch.mean(torch.log(D_real + 1e-8) + torch.log(1 - D_fake + 1e-8))
    D_loss.backward()
    D_solver.step()
    reset_grad()  # SYMPTOM

    G_sample = G(z, c)
    D_fake = D(G_sample)
    G_loss = -torch.mean(torch.log(D_fake + 1e-8))
    G_loss.backward()
    G_solver.step()
    reset_grad()

    G_sample = G(z, c)
    Q_c_given_x = Q(G_sample)
    crossent_loss = torch.mean(-torch.sum(c * torch.log(Q_c_given_x + 1e-8), dim=1))
    crossent_loss.backward()
    Q_solver.step()
    reset_grad()
