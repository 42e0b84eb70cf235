"""keras-core's torch backend implements `ops.slice_update(inputs, start_indices, updates)` as `inputs[slices] = updates; return inputs`, an in-place write into its argument: when the argument is a trainable variable (a leaf tensor that requires grad), as in a layer that writes the current batch summary into a slot of its learned memory, the first forward pass fails; the merged PR clones the tensor before the update.

source: https://github.com/keras-team/keras-core/pull/405
kind: bug
symptom: crash
verified: RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
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
    inputs[tuple(slices)] = updates  # ROOT
    return inputs


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
