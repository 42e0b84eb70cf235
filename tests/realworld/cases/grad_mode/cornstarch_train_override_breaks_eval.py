"""Cornstarch's `MultimodalModel` overrides `nn.Module.train` with its own freezing API, `train(module_name, mode=True)` (which sets one named part - an encoder, its projector or the language model - to train mode and trainable, or to eval mode and frozen), and had no `eval`. `nn.Module.eval()` is `self.train(False)`, so the evaluation step's `model.eval()` calls the override with `module_name=False`: the key lookup fails and evaluation crashes after a full training run.

source: https://github.com/cornstarch-org/Cornstarch/pull/53
kind: bug
symptom: crash
verified: ValueError: no module named False in this MultimodalModel
"""
import torch
from torch import nn

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB, DIM = 50, 32


class ModalEncoderModule(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.module = nn.Sequential(nn.Linear(in_dim, DIM), nn.GELU(), nn.Dropout(0.2))
        self.projector = nn.Linear(DIM, DIM)

    def forward(self, x):
        return self.projector(self.module(x))


class TinyLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.block = nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.2, batch_first=True)
        self.lm_head = nn.Linear(DIM, VOCAB)

    def forward(self, inputs_embeds):
        return self.lm_head(self.block(inputs_embeds))


class MultimodalModel(nn.Module):
    def __init__(self, encoders, language_model):
        super().__init__()
        self.encoders = encoders
        for key, encoder in encoders.items():
            self.add_module(f"{key}_encoder", encoder)
        self.language_model = language_model

    def _part(self, module_name):
        if module_name == "language_model":
            return self.language_model
        for key in self.encoders:
            if module_name == f"{key}_encoder":
                return self.encoders[key].module
            if module_name == f"{key}_projector":
                return self.encoders[key].projector
        raise ValueError(f"no module named {module_name} in this MultimodalModel")

    def train(self, module_name, mode=True):  # ROOT
        """Freeze (mode=False) or unfreeze (mode=True) one named part."""
        part = self._part(module_name)
        part.train(mode)
        part.requires_grad_(mode)
        return self

    def forward(self, features, input_ids):
        prefix = torch.cat([enc(features[key]) for key, enc in self.encoders.items()], dim=1)
        embeds = torch.cat([prefix, self.language_model.embed(input_ids)], dim=1)
        return self.language_model(embeds)[:, prefix.shape[1]:]


def make_batch(n=16):
    image = torch.randn(n, 1, 24)
    tokens = (image[:, 0, :6].abs() * 10).long().clamp(max=VOCAB - 1)
    return {"vision": image}, tokens


def evaluate(model, batches):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for features, tokens in batches:
            logits = model(features, tokens[:, :-1])
            total += nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)).item()
    return total / len(batches)


model = MultimodalModel({"vision": ModalEncoderModule(24)}, TinyLanguageModel())
model.train("vision_encoder", mode=False)
model.train("vision_projector", mode=True)
model.train("language_model", mode=True)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
train_batches = [make_batch() for _ in range(8)]
val_batches = [make_batch() for _ in range(2)]
for epoch in range(3):
    for features, tokens in train_batches:
        logits = model(features, tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: train loss {loss.item():.4f}")
print(f"validation loss {evaluate(model, val_batches):.4f}")
