"""pinns-torch's Navier-Stokes example derives the velocities in its output_fn from the network's stream function with autograd (u = d psi / d y, v = -d psi / d x), also in validation; run from a notebook with a default Lightning Trainer, validation runs under torch.inference_mode() (inference_mode=True is the Trainer's default; the Hydra config sets it to false), where enable_grad() inside the step cannot turn autograd back on and the derivative fails.

source: https://github.com/rezaakb/pinns-torch/issues/12
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


def gradient(dy, dx, ones_like_tensor=None, create_graph=True):
    if ones_like_tensor is None:
        ones_like_tensor = torch.ones_like(dy)
    return torch.autograd.grad([dy], [dx], grad_outputs=[ones_like_tensor], create_graph=create_graph)[0]  # SYMPTOM


class FCN(nn.Module):
    def __init__(self, layers=(3, 20, 20, 2)):
        super().__init__()
        mods = []
        for i in range(len(layers) - 2):
            mods += [nn.Linear(layers[i], layers[i + 1]), nn.Tanh()]
        mods.append(nn.Linear(layers[-2], layers[-1]))
        self.model = nn.Sequential(*mods)

    def forward(self, x, y, t):
        out = self.model(torch.cat([x, y, t], 1))
        return {"psi": out[:, 0:1], "p": out[:, 1:2]}


def output_fn(outputs, x, y, t):
    outputs["u"] = gradient(outputs["psi"], y)
    outputs["v"] = -gradient(outputs["psi"], x)
    return outputs


class PINNModule(nn.Module):
    def __init__(self, net, output_fn):
        super().__init__()
        self.net, self.output_fn = net, output_fn
        self.optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)

    def model_step(self, x, y, t, u, v):
        x, y, t = x.requires_grad_(True), y.requires_grad_(True), t.requires_grad_(True)
        outputs = self.output_fn(self.net(x, y, t), x, y, t)
        return ((outputs["u"] - u) ** 2).mean() + ((outputs["v"] - v) ** 2).mean()

    def training_step(self, batch):
        loss = self.model_step(*batch)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def validation_step(self, batch):
        with torch.enable_grad():
            return self.model_step(*[b.clone() for b in batch])


class Trainer:
    def __init__(self, max_epochs=2, inference_mode=True):
        self.max_epochs, self.inference_mode = max_epochs, inference_mode

    def _evaluation_context(self):
        return torch.inference_mode() if self.inference_mode else torch.no_grad()

    def fit(self, model, train_batches, val_batches):
        for epoch in range(self.max_epochs):
            for batch in train_batches:
                model.training_step(batch)
            with self._evaluation_context():
                val_loss = sum(model.validation_step(batch).item() for batch in val_batches)
            print(epoch, val_loss)


def make_batch(n=64):
    return tuple(torch.rand(n, 1) for _ in range(5))


torch.manual_seed(0)
model = PINNModule(FCN(), output_fn)
trainer = Trainer(max_epochs=2)  # ROOT
trainer.fit(model, [make_batch() for _ in range(3)], [make_batch()])
