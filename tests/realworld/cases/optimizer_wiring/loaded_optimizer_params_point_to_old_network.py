"""Resuming a CNN: the loaded optimizer_params still hold the parameters of the old network object.

source: https://github.com/kitzeslab/opensoundscape/issues/351
kind: bug
symptom: silent
verified: model.network.weight never changes after load_model(); training resumes on the old network
"""
import torch
import torch.nn as nn


class CNN:
    def __init__(self):
        self.network = nn.Linear(6, 2)
        self.optimizer_params = {"params": self.network.parameters(), "lr": 0.1}

    def _init_optimizer(self):
        return torch.optim.SGD(**self.optimizer_params)

    def train(self, x, y, epochs=3):
        optimizer = self._init_optimizer()
        for _ in range(epochs):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(self.network(x), y)
            loss.backward()
            optimizer.step()

    def save(self):
        return {"network": self.network, "optimizer_params": {"params": list(self.network.parameters()), "lr": 0.1}}


def load_model(model_dict):
    model = CNN()
    model.network.load_state_dict(model_dict["network"].state_dict())
    model.optimizer_params = model_dict["optimizer_params"]  # ROOT
    return model


torch.manual_seed(0)
x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
first = CNN()
first.train(x, y)
model = load_model(first.save())
model.train(x, y)
