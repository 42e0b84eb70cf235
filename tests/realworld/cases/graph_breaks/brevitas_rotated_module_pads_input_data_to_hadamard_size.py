"""brevitas' RotatedModule with expand=True pads its input up to the closest Hadamard size with pad_to_dim, and pad_to_dim pads `tensor.data`, so the rotated layer's input leaves the graph: when the rotated model is fine-tuned, every layer before a rotated layer gets no gradient and stays at its initial weights.

source: https://github.com/Xilinx/brevitas/pull/1194
kind: bug
symptom: silent
verified: after 3 steps model[0].weight.grad is None and model[0] max change 0.0, while the rotated layer moves (max change about 0.05)
"""
import torch
from torch import nn


def find_closest_hadamard_number(num_features):  # brevitas.graph.hadamard: here the next power of two
    return 1 << (num_features - 1).bit_length()


def matmul_hadU(X):  # brevitas.graph.hadamard: normalized Walsh-Hadamard transform of the last dim
    n, H = X.shape[-1], torch.ones(1, 1)
    while H.shape[0] < n:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return X @ H / n ** 0.5


def pad_to_dim(tensor: torch.Tensor, dim_to_expand: int, new_dim: int) -> torch.Tensor:
    # Given a tensor X, compute the padding along dim_to_expand so that we match the desired new_dim
    current_dim = tensor.shape[dim_to_expand]
    pad_size = int(new_dim - current_dim)
    pad_dim = len(tensor.data.shape) * 2
    pad_tensor = [0] * pad_dim
    pad_tensor[dim_to_expand * 2] = pad_size
    pad_tensor = list(reversed(pad_tensor))
    new_tensor = torch.nn.functional.pad(tensor.data, pad_tensor)  # ROOT
    return new_tensor


class RotatedModule(torch.nn.Module):  # fast_hadamard_transform (CUDA) path left out

    def __init__(self, layer, had_mat=None, k=None, expand=False) -> None:
        super().__init__()
        self.had_mat = None
        self.layer = layer
        self.k = k
        self.expand = expand

    def forward(self, inp, **kwargs):
        if self.expand:
            featured_dim = inp.dim() - 1
            num_features = inp.shape[-1]
            expanded_num_features = find_closest_hadamard_number(num_features)
            inp = pad_to_dim(inp, featured_dim, expanded_num_features)
        inp = matmul_hadU(inp)
        o = self.layer(inp)
        return o


torch.manual_seed(0)
# the expanded rotation pads the rotated layer's weight from 6 to 8 input features (equalize.py)
model = nn.Sequential(nn.Linear(10, 6), nn.ReLU(), RotatedModule(nn.Linear(8, 4), expand=True))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
before = [p.detach().clone() for p in model.parameters()]
for step in range(3):
    x, y = torch.randn(16, 10), torch.randn(16, 4)
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("model[0].weight.grad is None:", model[0].weight.grad is None)
for name, p, b in zip([n for n, _ in model.named_parameters()], model.parameters(), before):
    print(name, "max change", round((p.detach() - b).abs().max().item(), 4))
