"""TorchANI training script after the PR: validation runs under torch.no_grad() with model.train(False), and model.train(True) is set again before the next epoch's training steps.

source: https://github.com/aiqm/torchani/pull/560
kind: lookalike
"""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)
nn_model = nn.Sequential(nn.Linear(8, 16), nn.CELU(0.1), nn.Dropout(0.1), nn.Linear(16, 1))
mse = nn.MSELoss(reduction='none')
AdamW = torch.optim.AdamW(nn_model.parameters(), lr=1e-3)
training = [(torch.randn(16, 8), torch.randn(16)) for _ in range(4)]
validation = [(torch.randn(16, 8), torch.randn(16)) for _ in range(2)]


def validate():
    nn_model.train(False)
    total_mse, count = 0.0, 0
    with torch.no_grad():
        for species_coordinates, true_energies in validation:
            predicted_energies = nn_model(species_coordinates).squeeze(-1)
            total_mse += mse(predicted_energies, true_energies).sum().item()
            count += predicted_energies.shape[0]
    nn_model.train(True)
    return math.sqrt(total_mse / count)


for epoch in range(3):
    rmse = validate()
    for species_coordinates, true_energies in training:
        predicted_energies = nn_model(species_coordinates).squeeze(-1)
        loss = mse(predicted_energies, true_energies).mean()
        AdamW.zero_grad()
        loss.backward()
        AdamW.step()
    print(epoch, rmse, nn_model.training)
