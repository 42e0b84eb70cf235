"""TabularS3L's models switch between self-supervised pretraining (`set_first_phase`) and supervised fine-tuning (`set_second_phase(freeze_encoder=True)`, which calls `self.encoder.requires_grad_(False)`) by swapping `forward`. `set_first_phase` only swapped `forward` back: after a linear-probe evaluation in the second phase, resumed pretraining runs with the encoder still frozen, so the denoising loss trains only the pretraining heads and the encoder silently stays where the probe left it. The fix makes `set_first_phase` call `self.encoder.requires_grad_(True)`.

source: https://github.com/Alcoholrithm/TabularS3L/commit/29a89d0d17a4561a19df1ca21407485b5065dba0
kind: bug
symptom: silent
verified: over 30 resumed pretraining steps the encoder's weights move by 0 (max abs change) while the reconstruction head moves by 0.0289; in the look-alike the encoder moves by 0.0308
"""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

N_FEATURES, HIDDEN, N_CLASSES = 12, 32, 3


def mlp(inp, hidden, depth):
    layers = []
    for i in range(depth):
        layers += [nn.Linear(inp if i == 0 else hidden, hidden), nn.ReLU()]
    return nn.Sequential(*layers)


class DAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = mlp(N_FEATURES, HIDDEN, 3)
        self.mask_predictor_head = nn.Linear(HIDDEN, N_FEATURES)
        self.reconstruction_head = nn.Linear(HIDDEN, N_FEATURES)
        self.head = nn.Linear(HIDDEN, N_CLASSES)
        self.set_first_phase()

    def set_first_phase(self):
        self.forward = self.__first_phase_step  # ROOT

    def set_second_phase(self, freeze_encoder: bool = True):
        self.forward = self.__second_phase_step
        self.encoder.requires_grad_(not freeze_encoder)

    def __first_phase_step(self, x):
        emb = self.encoder(x)
        return self.mask_predictor_head(emb), self.reconstruction_head(emb)

    def __second_phase_step(self, x):
        return self.head(self.encoder(x))


def corrupt(x, p=0.3):
    mask = (torch.rand_like(x) < p).float()
    shuffled = x[torch.randperm(x.shape[0])]
    return x * (1 - mask) + shuffled * mask, mask


def pretrain(model, data, steps):
    model.set_first_phase()
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(steps):
        x = data[torch.randint(0, len(data), (64,))]
        x_corrupted, mask = corrupt(x)
        mask_logits, recon = model(x_corrupted)
        loss = F.binary_cross_entropy_with_logits(mask_logits, mask) + F.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()


def linear_probe(model, data, labels, steps):
    model.set_second_phase(freeze_encoder=True)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        idx = torch.randint(0, len(data), (64,))
        loss = F.cross_entropy(model(data[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()


data = torch.randn(512, N_FEATURES)
labels = (data[:, 0] > 0).long() + (data[:, 1] > 0.5).long()
model = DAE()
pretrain(model, data, steps=30)
linear_probe(model, data, labels, steps=20)  # monitor representation quality mid-pretraining

enc_before = [p.detach().clone() for p in model.encoder.parameters()]
rec_before = model.reconstruction_head.weight.detach().clone()
pretrain(model, data, steps=30)  # resume pretraining
enc_change = max((p.detach() - b).abs().max().item() for p, b in zip(model.encoder.parameters(), enc_before))
rec_change = (model.reconstruction_head.weight.detach() - rec_before).abs().max().item()
print(f"encoder max abs change during resumed pretraining: {enc_change:.4g}")
print(f"reconstruction head max abs change: {rec_change:.4g}")
