"""The trainer module turns gradients off globally when it is imported; user training later breaks.

source: https://github.com/scverse/scvi-tools/issues/214
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn

# --- scvi/inference/trainer.py ---------------------------------------------
torch.set_grad_enabled(False)  # ROOT


class Trainer:
    def __init__(self, model):
        self.model = model

    def get_latent(self, x):
        return self.model(x)


# --- user code, after `from scvi.inference import UnsupervisedTrainer` ------
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(32, 5), torch.randn(32, 1)
for _ in range(3):
    opt.zero_grad()
    loss = ((net(x) - y) ** 2).mean()
    loss.backward()  # SYMPTOM
    opt.step()
