"""curated-transformers builds a model on the meta device and then fills it from a checkpoint, replacing each entry of `module._parameters` directly. The loader wrapped the checkpoint tensor in a parameter first and only then called `.to(device=..., dtype=...)` for placement; when that converts (a bfloat16 checkpoint loaded as float32 here) the result is a copy with a grad_fn, not a leaf and not an `nn.Parameter`, and writing into `_parameters` bypasses the type check of `register_parameter`. Inference works, but fine-tuning fails as soon as the optimizer is built over `model.parameters()`.

source: https://github.com/explosion/curated-transformers/pull/362
kind: bug
symptom: crash
verified: ValueError: can't optimize a non-leaf Tensor
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, DIM, CLASSES = 64, 32, 3


class Encoder(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, DIM, device=device)
        self.layer = nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.0, batch_first=True, device=device)
        self.classifier = nn.Linear(DIM, CLASSES, device=device)

    def forward(self, ids):
        return self.classifier(self.layer(self.embeddings(ids)).mean(1))


def save_checkpoint():
    """A checkpoint as a hub would ship it: bfloat16 tensors."""
    return {name: t.detach().to(torch.bfloat16) for name, t in Encoder().state_dict().items()}


def _set_parameter(module, name, tensor, device, dtype):
    param = nn.Parameter(tensor, requires_grad=True)
    module._parameters[name] = param.to(device=device, dtype=dtype)  # ROOT


def load_model(checkpoint, device=torch.device("cpu"), dtype=torch.float32):
    model = Encoder(device=torch.device("meta"))
    for full_name, tensor in checkpoint.items():
        module_name, _, name = full_name.rpartition(".")
        module = model.get_submodule(module_name)
        _set_parameter(module, name, tensor, device, dtype)
    return model


model = load_model(save_checkpoint())
ids = torch.randint(0, VOCAB, (16, 10))
labels = (ids[:, 0] % CLASSES)
with torch.no_grad():
    print("inference works, logits shape:", tuple(model(ids).shape))

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    loss = nn.functional.cross_entropy(model(ids), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
