"""COMET's regression metric freezes its pretrained encoder for `nr_frozen_epochs` and unfreezes it in the `on_train_epoch_end` hook, but the hook compares the epoch counter before incrementing it: with `nr_frozen_epochs=1` the check at the end of epoch 0 sees 0, the encoder stays frozen through epoch 1 as well, and a 2-epoch fine-tuning never trains the encoder at all.

source: https://github.com/Unbabel/COMET/commit/e89b8fbf63051fc7c42729df334076b4a4ea85a9
kind: bug
symptom: silent
verified: after 2 epochs with nr_frozen_epochs=1 the encoder weights are unchanged (encoder changed: False) while the estimator moved; the look-alike's encoder changed: True
"""
import torch
from torch import nn

torch.manual_seed(0)


class Encoder(nn.Module):
    """Stands in for COMET's XLM-R encoder: embeddings and two transformer-like layers with freeze helpers."""

    def __init__(self, vocab=50, dim=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(2)])

    def freeze(self):
        for param in self.parameters():
            param.requires_grad = False

    def unfreeze(self):
        for param in self.parameters():
            param.requires_grad = True

    def layerwise_lr(self, lr, decay):
        groups = [{"params": self.embeddings.parameters(), "lr": lr * decay ** 2}]
        for i, layer in enumerate(self.layers):
            groups.append({"params": layer.parameters(), "lr": lr * decay ** (1 - i)})
        return groups

    def forward(self, ids):
        h = self.embeddings(ids)
        for layer in self.layers:
            h = torch.tanh(layer(h))
        return h.mean(1)


class RegressionMetric(nn.Module):
    def __init__(self, nr_frozen_epochs=1, encoder_learning_rate=1e-3, learning_rate=1e-2, layerwise_decay=0.95):
        super().__init__()
        self.hparams = dict(nr_frozen_epochs=nr_frozen_epochs, encoder_learning_rate=encoder_learning_rate,
                            learning_rate=learning_rate, layerwise_decay=layerwise_decay)
        self.encoder = Encoder()
        self.estimator = nn.Sequential(nn.Linear(48, 16), nn.Tanh(), nn.Linear(16, 1))
        self.epoch_nr = 0
        if nr_frozen_epochs > 0:
            self._frozen = True
            self.freeze_encoder()
        else:
            self._frozen = False
        self.nr_frozen_epochs = nr_frozen_epochs

    def freeze_encoder(self):
        self.encoder.freeze()

    def unfreeze_encoder(self):
        if self._frozen:
            self.encoder.unfreeze()
            self._frozen = False

    def configure_optimizers(self):
        layer_parameters = self.encoder.layerwise_lr(self.hparams["encoder_learning_rate"],
                                                     self.hparams["layerwise_decay"])
        top_layers_parameters = [{"params": self.estimator.parameters(), "lr": self.hparams["learning_rate"]}]
        return torch.optim.AdamW(layer_parameters + top_layers_parameters, lr=self.hparams["learning_rate"])

    def on_train_epoch_end(self):
        """Hook used to unfreeze encoder during training."""
        if self.epoch_nr >= self.nr_frozen_epochs and self._frozen:  # ROOT
            self.unfreeze_encoder()
            self._frozen = False
        self.epoch_nr += 1

    def forward(self, src, mt, ref):
        s, m, r = self.encoder(src), self.encoder(mt), self.encoder(ref)
        return self.estimator(torch.cat([m, m * r, m * s], dim=-1)).squeeze(-1)


model = RegressionMetric(nr_frozen_epochs=1)
optimizer = model.configure_optimizers()
encoder_before = [p.detach().clone() for p in model.encoder.parameters()]
estimator_before = [p.detach().clone() for p in model.estimator.parameters()]
max_epochs = 2
for epoch in range(max_epochs):  # the Lightning trainer's epoch loop
    for step in range(8):
        src, mt, ref = (torch.randint(0, 50, (4, 7)) for _ in range(3))
        score = torch.rand(4)
        loss = nn.functional.mse_loss(model(src, mt, ref), score)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.on_train_epoch_end()
    print(f"epoch {epoch}: loss {loss.item():.4f}, encoder frozen: {model._frozen}")

changed = lambda before, module: any(not torch.equal(b, p) for b, p in zip(before, module.parameters()))
print(f"encoder changed: {changed(encoder_before, model.encoder)}, "
      f"estimator changed: {changed(estimator_before, model.estimator)}")
