"""s-vae-pytorch after "Fix gradients of torch.sqrt(x) not becoming NaN if x = 0": `VonMisesFisher.rsample` takes `torch.sqrt(torch.clamp(1 - (w ** 2), 1e-10))`, so a sample with `w` equal to 1.0 has a finite derivative (the clamp passes no gradient below its bound) and the concentrated 2-d hyperspherical VAE keeps finite weights.

source: https://github.com/nicola-decao/s-vae-pytorch/commit/f45d686ce3f64001635b6d9be5f1574209d4292e
kind: lookalike
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class VonMisesFisher(torch.distributions.Distribution):
    arg_constraints = {'loc': torch.distributions.constraints.real,
                       'scale': torch.distributions.constraints.positive}
    support = torch.distributions.constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.dtype = loc.dtype
        self.loc = loc
        self.scale = scale
        self.device = loc.device
        self.__m = loc.shape[-1]
        self.__e1 = (torch.Tensor([1.] + [0] * (loc.shape[-1] - 1))).to(self.device)
        super(VonMisesFisher, self).__init__(self.loc.size(), validate_args=False)

    def rsample(self, shape=torch.Size()):
        shape = shape if isinstance(shape, torch.Size) else torch.Size([shape])
        w = self.__sample_w_rej(shape=shape)
        v = (torch.distributions.Normal(0, 1).sample(
            shape + torch.Size(self.loc.shape)).to(self.device).transpose(0, -1)[1:]).transpose(0, -1)
        v = v / v.norm(dim=-1, keepdim=True)
        w_ = torch.sqrt(torch.clamp(1 - (w ** 2), 1e-10))
        x = torch.cat((w, w_ * v), -1)
        z = self.__householder_rotation(x)
        return z.type(self.dtype)

    def __sample_w_rej(self, shape):
        c = torch.sqrt((4 * (self.scale ** 2)) + (self.__m - 1) ** 2)
        b_true = (-2 * self.scale + c) / (self.__m - 1)
        b_app = (self.__m - 1) / (4 * self.scale)
        s = torch.min(torch.max(torch.tensor([0.], device=self.device),
                                self.scale - 10), torch.tensor([1.], device=self.device))
        b = b_app * s + b_true * (1 - s)
        a = (self.__m - 1 + 2 * self.scale + c) / 4
        d = (4 * a * b) / (1 + b) - (self.__m - 1) * math.log(self.__m - 1)
        self.__b, (self.__e, self.__w) = b, self.__while_loop(b, a, d, shape)
        return self.__w

    def __while_loop(self, b, a, d, shape):
        b, a, d = [e.repeat(*shape, *([1] * len(self.scale.shape))) for e in (b, a, d)]
        w, e, bool_mask = torch.zeros_like(b).to(self.device), torch.zeros_like(
            b).to(self.device), (torch.ones_like(b) == 1).to(self.device)
        shape = shape + torch.Size(self.scale.shape)
        while bool_mask.sum() != 0:
            e_ = torch.distributions.Beta((self.__m - 1) / 2, (self.__m - 1) /
                                          2).sample(shape[:-1]).reshape(shape).to(self.device)
            u = torch.distributions.Uniform(0, 1).sample(shape).to(self.device)
            w_ = (1 - (1 + b) * e_) / (1 - (1 - b) * e_)
            t = (2 * a * b) / (1 - (1 - b) * e_)
            accept = ((self.__m - 1) * t.log() - t + d) > torch.log(u)
            reject = ~accept
            w[bool_mask * accept] = w_[bool_mask * accept]
            e[bool_mask * accept] = e_[bool_mask * accept]
            bool_mask[bool_mask * accept] = reject[bool_mask * accept]
        return e, w

    def __householder_rotation(self, x):
        u = (self.__e1 - self.loc)
        u = u / (u.norm(dim=-1, keepdim=True) + 1e-5)
        return x - 2 * (x * u).sum(-1, keepdim=True) * u


def kl_vmf_uniform_2d(scale):
    """KL(vMF(m=2) || uniform on the circle), with ive(0, k) = i0e(k) and ive(1, k) = i1e(k)."""
    k = scale.squeeze(-1)
    ratio = torch.special.i1e(k) / torch.special.i0e(k)
    return k * ratio - (k + torch.log(torch.special.i0e(k)))


class ModelVAE(nn.Module):
    def __init__(self, h_dim=64, z_dim=2):
        super().__init__()
        self.fc_e0 = nn.Linear(784, h_dim * 2)
        self.fc_e1 = nn.Linear(h_dim * 2, h_dim)
        self.fc_mean = nn.Linear(h_dim, z_dim)
        self.fc_var = nn.Linear(h_dim, 1)
        self.fc_d0 = nn.Linear(z_dim, h_dim)
        self.fc_d1 = nn.Linear(h_dim, h_dim * 2)
        self.fc_logits = nn.Linear(h_dim * 2, 784)
        nn.init.constant_(self.fc_var.bias, 3000.0)  # a posterior that has become concentrated (kappa ~ 3000)

    def encode(self, x):
        x = F.relu(self.fc_e1(F.relu(self.fc_e0(x))))
        z_mean = self.fc_mean(x)
        z_mean = z_mean / z_mean.norm(dim=-1, keepdim=True)
        z_var = F.softplus(self.fc_var(x)) + 1
        return z_mean, z_var

    def forward(self, x):
        z_mean, z_var = self.encode(x)
        q_z = VonMisesFisher(z_mean, z_var)
        z = q_z.rsample()
        x_ = self.fc_logits(F.relu(self.fc_d1(F.relu(self.fc_d0(z)))))
        return (z_mean, z_var), q_z, z, x_


model = ModelVAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = (torch.rand(256, 784) > 0.7).float()

for step in range(8):
    x_mb = images[torch.randint(0, 256, (128,))]
    (z_mean, z_var), q_z, z, x_mb_ = model(x_mb)
    loss_recon = nn.BCEWithLogitsLoss(reduction='none')(x_mb_, x_mb).sum(-1).mean()
    loss_kl = kl_vmf_uniform_2d(z_var).mean()
    loss = loss_recon + loss_kl
    optimizer.zero_grad()
    loss.backward()
    grad_finite = all(torch.isfinite(p.grad).all().item() for p in model.parameters())
    optimizer.step()
    nan_weights = any(torch.isnan(p).any().item() for p in model.parameters())
    print(f"step {step}: loss {loss.item():.3f}  grads finite: {grad_finite}  nan in weights: {nan_weights}")
    if nan_weights:  # measurement only: with NaN weights the rejection sampler never accepts again
        break
