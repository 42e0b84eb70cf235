"""tiny-diffusion's DDPM training loop calls `loss.backward(loss)`: the loss is passed as the `gradient` argument, so every parameter's gradient is the true gradient multiplied by the current loss value (a per-step scale that shrinks as training converges) instead of the gradient of the MSE noise-prediction loss.

source: https://github.com/tanelp/tiny-diffusion/commit/726b6bbbf2c9e3d23dff9eaea2fda10d0af6a78c
kind: bug
symptom: silent
verified: each step's gradient is the loss-gradient times the loss value (grad/reference ratio 0.88-1.28, equal to the printed loss, instead of 1.000); the look-alike's ratio is 1.000
"""
import math

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)


class SinusoidalEmbedding(nn.Module):
    def __init__(self, size, scale=1.0):
        super().__init__()
        self.size = size
        self.scale = scale

    def forward(self, x):
        x = x * self.scale
        half = self.size // 2
        emb = math.log(10000.0) / (half - 1)
        emb = torch.exp(-emb * torch.arange(half))
        emb = x.unsqueeze(-1) * emb.unsqueeze(0)
        return torch.cat((torch.sin(emb), torch.cos(emb)), dim=-1)


class Block(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.ff = nn.Linear(size, size)
        self.act = nn.GELU()

    def forward(self, x):
        return x + self.act(self.ff(x))


class MLP(nn.Module):
    def __init__(self, hidden_size=64, hidden_layers=2, emb_size=32):
        super().__init__()
        self.time_mlp = SinusoidalEmbedding(emb_size)
        self.input_mlp1 = SinusoidalEmbedding(emb_size, scale=25.0)
        self.input_mlp2 = SinusoidalEmbedding(emb_size, scale=25.0)
        layers = [nn.Linear(3 * emb_size, hidden_size), nn.GELU()]
        for _ in range(hidden_layers):
            layers.append(Block(hidden_size))
        layers.append(nn.Linear(hidden_size, 2))
        self.joint_mlp = nn.Sequential(*layers)

    def forward(self, x, t):
        x = torch.cat((self.input_mlp1(x[:, 0]), self.input_mlp2(x[:, 1]), self.time_mlp(t)), dim=-1)
        return self.joint_mlp(x)


class NoiseScheduler:
    def __init__(self, num_timesteps=50, beta_start=0.0001, beta_end=0.02):
        self.num_timesteps = num_timesteps
        self.betas = torch.linspace(beta_start, beta_end, num_timesteps, dtype=torch.float32)
        self.alphas_cumprod = torch.cumprod(1.0 - self.betas, dim=0)
        self.sqrt_alphas_cumprod = self.alphas_cumprod ** 0.5
        self.sqrt_one_minus_alphas_cumprod = (1 - self.alphas_cumprod) ** 0.5

    def add_noise(self, x_start, x_noise, timesteps):
        s1 = self.sqrt_alphas_cumprod[timesteps].reshape(-1, 1)
        s2 = self.sqrt_one_minus_alphas_cumprod[timesteps].reshape(-1, 1)
        return s1 * x_start + s2 * x_noise


theta = torch.rand(512) * math.pi
dataset = torch.stack((torch.cos(theta), torch.sin(theta)), dim=1) + 0.05 * torch.randn(512, 2)
model = MLP()
noise_scheduler = NoiseScheduler()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

for step in range(6):
    batch = dataset[torch.randint(0, 512, (32,))]
    noise = torch.randn(batch.shape)
    timesteps = torch.randint(0, noise_scheduler.num_timesteps, (batch.shape[0],)).long()
    noisy = noise_scheduler.add_noise(batch, noise, timesteps)
    noise_pred = model(noisy, timesteps)
    loss = F.mse_loss(noise_pred, noise)
    # measurement only: the gradient of this loss, computed on the same graph before the training backward
    reference = torch.autograd.grad(loss, model.joint_mlp[-1].weight, retain_graph=True)[0]
    loss.backward(loss)  # ROOT
    ratio = (model.joint_mlp[-1].weight.grad.norm() / reference.norm()).item()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step}: loss {loss.item():.4f}  grad/reference ratio {ratio:.3f}")
