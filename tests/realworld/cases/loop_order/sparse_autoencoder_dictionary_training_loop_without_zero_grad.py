"""A sparse-autoencoder (dictionary learning on a language model's cached MLP activations) training script, after a refactor, runs `loss.backward()` and `optimizer.step()` each step with no `optimizer.zero_grad()`: the dictionary's `.grad` holds the sum of every step's gradient so far, AdamW follows that stale running sum instead of the current batch's gradient, and the dictionary learns far worse reconstructions, with no error.

source: https://github.com/jannik-brinkmann/sparse-autoencoders/commit/10fc6fad277ff437dacfd90c30448bab721f3a65
kind: bug
symptom: silent
verified: after 300 steps the gradient norm at the last step is 6.741 against 0.003932 for the look-alike (which zeroes the gradients each step), and the held-out reconstruction MSE is 0.0907 against 0.0024 for the look-alike
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)

ACT_DIM, RATIO, N_TRUE = 32, 4, 48
SPARSITY_COEFFICIENT = 8e-3


class SparseDictionary(nn.Module):
    def __init__(self, activation_size, n_dict_components):
        super().__init__()
        self.encoder = nn.Linear(activation_size, n_dict_components)
        self.decoder = nn.Linear(n_dict_components, activation_size, bias=False)
        self.b_d = nn.Parameter(torch.zeros(activation_size))

    def encode(self, x):
        return torch.relu(self.encoder(x - self.b_d))

    def decode(self, features):
        return self.decoder(features) + self.b_d


class ActivationSource:
    """Stand-in for the cached activations: sparse combinations of fixed ground-truth directions."""

    def __init__(self):
        self.directions = nn.functional.normalize(torch.randn(N_TRUE, ACT_DIM), dim=-1)

    def batch(self, n=128):
        codes = torch.rand(n, N_TRUE) * (torch.rand(n, N_TRUE) < 0.06)
        return codes @ self.directions


def compute_loss(activations, features, reconstructions):
    l2_loss = (activations - reconstructions).pow(2).mean()
    l1_loss = torch.norm(features, 1, dim=-1).mean()
    return l2_loss + SPARSITY_COEFFICIENT * l1_loss


def train(dictionary, source, steps=300, learning_rate=4e-3):
    optimizer = torch.optim.AdamW(dictionary.parameters(), lr=learning_rate)
    for _ in range(steps):
        activations = source.batch()
        features = dictionary.encode(activations)
        reconstructions = dictionary.decode(features)
        loss = compute_loss(activations, features, reconstructions)
        loss.backward()  # ROOT
        optimizer.step()
    return torch.cat([p.grad.flatten() for p in dictionary.parameters()]).norm().item()


def main():
    source = ActivationSource()
    dictionary = SparseDictionary(ACT_DIM, ACT_DIM * RATIO)
    grad_norm = train(dictionary, source)
    torch.manual_seed(1)
    with torch.no_grad():
        held_out = source.batch(512)
        mse = (dictionary.decode(dictionary.encode(held_out)) - held_out).pow(2).mean().item()
    print(f"gradient norm at the last step: {grad_norm:.4g}")
    print(f"held-out reconstruction MSE: {mse:.4f}")


if __name__ == "__main__":
    main()
