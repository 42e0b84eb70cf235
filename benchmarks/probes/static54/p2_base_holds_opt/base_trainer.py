import torch


class BaseTrainer:
    def __init__(self, model, lr=1e-2, epochs=3):
        self.model = model
        self.epochs = epochs
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, step_size=10)

    def train(self, loader):
        for epoch in range(self.epochs):
            self._train_epoch(loader)

    def _train_epoch(self, loader):
        raise NotImplementedError

    def state(self):
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
