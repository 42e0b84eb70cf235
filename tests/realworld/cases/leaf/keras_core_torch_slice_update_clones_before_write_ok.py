"""keras-core's torch `slice_update` after the merged PR "Copy torch tensor before update in `slice_update`": the op clones its input and writes the update into the copy, so slicing a trainable variable is an out-of-place operation in the graph, the layer's learned memory gets gradients through the untouched slots and trains.

source: https://github.com/keras-team/keras-core/pull/405
kind: lookalike
"""
import builtins

import torch
import torch.nn as nn
import torch.nn.functional as F


# --- backend/torch/core.py ---------------------------------------------------------------
def convert_to_tensor(x, dtype=None):
    if isinstance(x, torch.Tensor):
        return x if dtype is None else x.to(dtype)
    return torch.as_tensor(x, dtype=dtype)


def slice_update(inputs, start_indices, updates):
    inputs = convert_to_tensor(inputs)
    start_indices = convert_to_tensor(start_indices).to(torch.int64)
    updates = convert_to_tensor(updates)
    python_slice = builtins.slice  # `slice` is the name of another backend op
    slices = [python_slice(int(start_index), int(start_index) + update_length)
              for start_index, update_length in zip(start_indices, updates.shape)]
    outputs = torch.clone(inputs)
    outputs[tuple(slices)] = updates
    return outputs


# --- a layer built on the op -------------------------------------------------------------
class MemoryAttention(nn.Module):
    """Attends from every token to a learned memory whose first slot holds the batch summary."""

    def __init__(self, dim, num_slots=4):
        super().__init__()
        self.memory = nn.Parameter(torch.randn(num_slots, dim) * 0.1)
        self.query = nn.Linear(dim, dim)

    def forward(self, x):  # x: (batch, tokens, dim)
        summary = x.mean(dim=(0, 1)).unsqueeze(0)
        memory = slice_update(self.memory, [0, 0], summary)
        scores = self.query(x) @ memory.t()
        return x + F.softmax(scores, dim=-1) @ memory


torch.manual_seed(0)
model = nn.Sequential(MemoryAttention(16), nn.Flatten(), nn.Linear(16 * 6, 3))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(8, 6, 16), torch.randint(0, 3, (8,))
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
