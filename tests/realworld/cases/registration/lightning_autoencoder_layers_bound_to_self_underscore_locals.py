"""Lightning Autoencoder: the layers are bound to locals named self_layer_..., so configure_optimizers gets nothing.

source: https://github.com/Lightning-AI/pytorch-lightning/issues/2282
kind: bug
symptom: crash
verified: optimizer got an empty parameter list
"""
import argparse
import torch
import torch.nn as nn


class Autoencoder(nn.Module):
    def __init__(self, hparams: argparse.Namespace):
        super(Autoencoder, self).__init__()
        self.hparams = hparams
        self_layer_e_1 = nn.Conv1d(hparams.in_channels, hparams.out_channels, hparams.kernel_size)  # ROOT
        self_layer_e_2 = nn.Conv1d(hparams.out_channels, hparams.in_channels, hparams.kernel_size)
        self_layer_d_1 = nn.ConvTranspose1d(hparams.in_channels, hparams.out_channels, hparams.kernel_size)
        self_layer_d_2 = nn.ConvTranspose1d(hparams.out_channels, hparams.in_channels, hparams.kernel_size)

    def forward(self, x):
        x = torch.relu(self.layer_e_1(x))
        encoded = torch.relu(self.layer_e_2(x))
        x = torch.relu(self.layer_d_1(encoded))
        decoded = self.layer_d_2(x)
        return decoded, encoded

    def training_step(self, batch, batch_idx):
        x = batch
        decoded, encoded = self(x)
        return nn.functional.mse_loss(decoded, x)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)  # SYMPTOM
        return optimizer


torch.manual_seed(0)
hparams = argparse.Namespace(in_channels=2, out_channels=4, kernel_size=3, lr=1e-3)
model = Autoencoder(hparams)
optimizer = model.configure_optimizers()
for batch_idx, batch in enumerate([torch.randn(4, 2, 16) for _ in range(2)]):
    loss = model.training_step(batch, batch_idx)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
