"""ml_gym's `Trainer.train` calls `model.train()` once and hands the whole multi-epoch loop to `TrainComponent.train`, whose end-of-epoch callback runs the evaluator, and the evaluator switches the model to `eval()`; nothing switches it back, so from the second epoch on every training batch runs with dropout off and BatchNorm normalising with (and no longer updating) its running statistics, with no error.

source: https://github.com/mlgym/mlgym/commit/404f72785528a2cc96801d24434ceb74f318fedb
kind: bug
symptom: silent
verified: during epochs 2-3 `_train_batch` sees `model.training` False on every batch and BatchNorm's `running_mean` stays frozen at its end-of-epoch-1 value (max abs change 0.0 over epochs 2-3) while the weights keep being updated; in the look-alike (`model.train()` in `TrainComponent.train` and after each callback) every batch trains in training mode and the running mean keeps moving (max abs change 1.95)
"""
from itertools import chain

import torch
import torch.nn as nn
import numpy as np


class NNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 2))

    def forward(self, x):
        return self.net(x)


class EvalComponent:
    def __init__(self, dataset_loaders):
        self.dataset_loaders = dataset_loaders

    def evaluate(self, model):
        model.eval()
        results = {}
        with torch.no_grad():
            for split, loader in self.dataset_loaders.items():
                correct = sum((model(x).argmax(1) == y).sum().item() for x, y in loader)
                results[split] = correct / sum(len(y) for _, y in loader)
        return results


class Evaluator:
    def __init__(self, eval_component):
        self.eval_component = eval_component

    def evaluate(self, model, epoch_result_callback_fun=None):
        model = model.eval()
        results = self.eval_component.evaluate(model=model)
        if epoch_result_callback_fun is not None:
            epoch_result_callback_fun(results)
        return results


class TrainComponent:
    def __init__(self, loss_fun):
        self.loss_fun = loss_fun
        self.modes = []

    def _train_batch(self, batch, model, optimizer):
        x, y = batch
        self.modes.append(model.training)
        model.zero_grad()
        loss = self.loss_fun(model(x), y)
        loss.sum().backward()
        optimizer.step()
        return model

    def train(self, model, optimizer, dataloader, epoch_done_callback_fun, num_epochs, num_batches_per_epoch=None):
        if num_batches_per_epoch is None:
            num_batches_per_epoch = len(dataloader)
        num_total_batches = num_batches_per_epoch * num_epochs
        num_dataloaders = int(np.ceil(num_total_batches / len(dataloader)))
        data_loaders = chain(*([dataloader] * num_dataloaders))
        for batch_id, batch in zip(range(num_total_batches), data_loaders):
            current_epoch = int(batch_id / num_batches_per_epoch)
            model = self._train_batch(batch=batch, model=model, optimizer=optimizer)
            if (batch_id + 1) % num_batches_per_epoch == 0:  # when epoch done
                epoch_done_callback_fun(num_epochs=num_epochs, current_epoch=current_epoch, model=model)  # ROOT
        return model


class Trainer:
    def __init__(self, train_component, train_loader):
        self.train_component = train_component
        self.train_loader = train_loader

    def train(self, num_epochs, model, optimizer, epoch_done_callback):
        model = model.train()
        model = self.train_component.train(model=model, optimizer=optimizer, dataloader=self.train_loader,
                                           epoch_done_callback_fun=epoch_done_callback, num_epochs=num_epochs)
        return model


torch.manual_seed(0)
x = torch.randn(256, 8) + 1.0
y = (x[:, 0] > 1.0).long()
train_loader = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]
val_loader = [(x[192:], y[192:])]

model = NNModel()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_component = TrainComponent(loss_fun=nn.CrossEntropyLoss(reduction="none"))
evaluator = Evaluator(EvalComponent({"val": val_loader}))
bn = model.net[1]
running_means = []


def epoch_done_callback(num_epochs, current_epoch, model):
    evaluator.evaluate(model)
    running_means.append(bn.running_mean.clone())


Trainer(train_component, train_loader).train(num_epochs=3, model=model, optimizer=optimizer,
                                             epoch_done_callback=epoch_done_callback)
print("training mode per batch:", train_component.modes)
print("running_mean change over epochs 2-3: %.4f" % (running_means[2] - running_means[0]).abs().max().item())
