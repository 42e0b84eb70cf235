"""PyTorch-StudioGAN's `prepare_parallel_training` wraps the discriminator in `DistributedDataParallel` without `find_unused_parameters`, also when the InfoGAN option (`MODEL.info_type`) gives the discriminator its latent-code heads: those heads only enter the generator's information loss, so the discriminator step's backward leaves their gradients unreduced and the next forward of the wrapped discriminator fails.

source: https://github.com/POSTECH-CVLab/PyTorch-StudioGAN/commit/313656e7361941fdf448a56de8d1d6600368ba78
kind: bug
symptom: crash
verified: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one
"""
import os
import tempfile
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

torch.manual_seed(0)
torch.set_num_threads(1)

Z_DIM, INFO_DIM, IMG = 16, 4, 3 * 8 * 8


class Generator(nn.Module):
    def __init__(self, MODEL):
        super().__init__()
        info_dim = MODEL.info_num_discrete_c * MODEL.info_dim_discrete_c if MODEL.info_type != "N/A" else 0
        if MODEL.info_type != "N/A":
            self.info_mix_linear = nn.Linear(Z_DIM + info_dim, Z_DIM)
        self.MODEL = MODEL
        self.net = nn.Sequential(nn.Linear(Z_DIM, 64), nn.ReLU(), nn.Linear(64, IMG), nn.Tanh())

    def forward(self, z):
        if self.MODEL.info_type != "N/A":
            z = self.info_mix_linear(z)
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, MODEL):
        super().__init__()
        self.MODEL = MODEL
        self.blocks = nn.Sequential(nn.Linear(IMG, 64), nn.LeakyReLU(0.2))
        self.linear1 = nn.Linear(64, 1)
        if MODEL.info_type in ["discrete", "both"]:
            self.info_discrete_linear = nn.Linear(64, MODEL.info_num_discrete_c * MODEL.info_dim_discrete_c)

    def forward(self, x):
        h = self.blocks(x)
        out = {"adv_output": self.linear1(h).squeeze(1)}
        if self.MODEL.info_type in ["discrete", "both"]:
            out["info_discrete_c_logits"] = self.info_discrete_linear(h)
        return out


def prepare_parallel_training(Gen, Dis, MODEL, distributed_data_parallel, synchronized_bn):
    if distributed_data_parallel:
        Gen = DDP(Gen, broadcast_buffers=synchronized_bn)
        Dis = DDP(Dis, broadcast_buffers=False if MODEL.backbone == "stylegan2" else synchronized_bn)  # ROOT
    return Gen, Dis


def sample_latents(batch, MODEL):
    z = torch.randn(batch, Z_DIM)
    codes = torch.randint(0, MODEL.info_dim_discrete_c, (batch, MODEL.info_num_discrete_c))
    one_hot = F.one_hot(codes, MODEL.info_dim_discrete_c).float().view(batch, -1)
    return torch.cat([z, one_hot], 1), codes


# One-process group (the launcher would start one per GPU); the file store lives in a temporary directory.
store_dir = tempfile.mkdtemp()
dist.init_process_group("gloo", init_method=f"file://{os.path.join(store_dir, 'store')}", rank=0, world_size=1)

MODEL = SimpleNamespace(backbone="resnet", info_type="discrete", info_num_discrete_c=1, info_dim_discrete_c=INFO_DIM)
Gen, Dis = prepare_parallel_training(Generator(MODEL), Discriminator(MODEL), MODEL,
                                     distributed_data_parallel=True, synchronized_bn=False)
g_opt = torch.optim.Adam(Gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
d_opt = torch.optim.Adam(Dis.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_images = torch.rand(256, IMG) * 2 - 1

try:
    for step in range(3):
        real = real_images[torch.randint(0, 256, (32,))]
        # discriminator step: adversarial loss only
        zs, _ = sample_latents(32, MODEL)
        with torch.no_grad():
            fake = Gen(zs)
        d_loss = F.softplus(-Dis(real)["adv_output"]).mean() + F.softplus(Dis(fake)["adv_output"]).mean()
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        # generator step: adversarial loss plus InfoGAN's discrete-code loss
        zs, codes = sample_latents(32, MODEL)
        fake_dict = Dis(Gen(zs))
        info_loss = F.cross_entropy(fake_dict["info_discrete_c_logits"], codes[:, 0])
        g_loss = F.softplus(-fake_dict["adv_output"]).mean() + info_loss
        g_opt.zero_grad()
        d_opt.zero_grad()
        g_loss.backward()
        g_opt.step()
        d_opt.step()  # the info head is trained by the generator step's information loss
    print(f"d_loss {d_loss.item():.3f}, g_loss {g_loss.item():.3f}")
finally:
    dist.destroy_process_group()
