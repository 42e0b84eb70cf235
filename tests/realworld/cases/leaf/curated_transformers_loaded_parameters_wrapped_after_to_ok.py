"""curated-transformers' loader after the fix: the checkpoint tensor is moved and converted first (`tensor.to(device=..., dtype=...)`) and only then wrapped in `nn.Parameter`, so every entry written into `module._parameters` is a leaf parameter and the optimizer built over `model.parameters()` fine-tunes the loaded model.

source: https://github.com/explosion/curated-transformers/pull/362
kind: lookalike
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
    module._parameters[name] = nn.Parameter(tensor.to(device=device, dtype=dtype), requires_grad=True)


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
