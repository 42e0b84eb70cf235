"""asteroid after PR #259: System.optimizer_step steps the per-batch schedulers when there are any and then always calls `super().optimizer_step(...)`, so a recipe trained without an LR scheduler updates its model on every batch.

source: https://github.com/asteroid-team/asteroid/pull/259
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class LightningModule(nn.Module):
    """The part of pytorch_lightning.LightningModule (0.9) that the Trainer below calls."""

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_idx=0, second_order_closure=None,
                       on_tpu=False, using_native_amp=False, using_lbfgs=False):
        optimizer.step()

    def optimizer_zero_grad(self, epoch, batch_idx, optimizer, optimizer_idx):
        optimizer.zero_grad()


class Trainer:
    """Automatic optimization as in Lightning: backward, optimizer_step hook, zero_grad hook."""

    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, system):
        optimizer = system.configure_optimizers()
        for epoch in range(self.max_epochs):
            losses = []
            for batch_idx, batch in enumerate(system.train_dataloader()):
                output = system.training_step(batch, batch_idx)
                output["loss"].backward()
                system.optimizer_step(epoch, batch_idx, optimizer, 0)
                system.optimizer_zero_grad(epoch, batch_idx, optimizer, 0)
                losses.append(output["loss"].item())
            print(f"epoch {epoch}: train_loss {sum(losses) / len(losses):.4f}")


class System(LightningModule):
    def __init__(self, model, optimizer, loss_func, train_loader, val_loader=None, scheduler=None, config=None):
        super().__init__()
        self.model = model
        self.optimizer = optimizer
        self.loss_func = loss_func
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.scheduler = scheduler
        self.config = {} if config is None else config

    def forward(self, *args, **kwargs):
        return self.model(*args, **kwargs)

    def common_step(self, batch, batch_nb, train=True):
        inputs, targets = batch
        est_targets = self(inputs)
        loss = self.loss_func(est_targets, targets)
        return loss

    def training_step(self, batch, batch_nb):
        loss = self.common_step(batch, batch_nb, train=True)
        tensorboard_logs = {"train_loss": loss}
        return {"loss": loss, "log": tensorboard_logs}

    def optimizer_step(self, *args, **kwargs) -> None:
        if self.scheduler is not None:
            if not isinstance(self.scheduler, (list, tuple)):
                self.scheduler = [self.scheduler]  # support multiple schedulers
            for sched in self.scheduler:
                if isinstance(sched, dict) and sched["interval"] == "batch":
                    sched["scheduler"].step()  # call step on each batch scheduler
        super().optimizer_step(*args, **kwargs)

    def configure_optimizers(self):
        return self.optimizer

    def train_dataloader(self):
        return self.train_loader


class MaskNet(nn.Module):
    """Stands in for a separation model: a learned mask over a mixture's frames, two sources."""

    def __init__(self, n_feats=32, n_src=2):
        super().__init__()
        self.n_src = n_src
        self.masker = nn.Sequential(nn.Linear(n_feats, 64), nn.ReLU(), nn.Linear(64, n_feats * n_src))

    def forward(self, mix):
        masks = torch.sigmoid(self.masker(mix)).view(mix.shape[0], self.n_src, -1)
        return masks * mix.unsqueeze(1)


def pairwise_mse(est_targets, targets):
    return ((est_targets - targets) ** 2).mean()


sources = [torch.rand(8, 2, 32) for _ in range(8)]
train_loader = [(s.sum(dim=1), s) for s in sources]
model = MaskNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
system = System(model=model, loss_func=pairwise_mse, optimizer=optimizer, train_loader=train_loader,
                scheduler=None, config={"training": {"epochs": 2}})

before = [p.detach().clone() for p in model.parameters()]
Trainer(max_epochs=2).fit(system)
changed = sum(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
print(f"{changed}/{len(before)} parameter tensors changed after training")
