import torch


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model, self.optimizer, self.loader = model, optimizer, loader

    @torch.no_grad()
    def evaluation_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return {"loss": self.compute_loss(logits, y), "logits": logits}

    def compute_loss(self, logits, y):
        return torch.nn.functional.cross_entropy(logits, y)

    def training_step(self, batch):
        x, y = batch
        return {"loss": self.compute_loss(self.model(x), y)}

    def fit(self, epochs=1):
        for _ in range(epochs):
            self.model.train()
            for batch in self.loader:
                out = self.training_step(batch)
                self.optimizer.zero_grad()
                out["loss"].backward()
                self.optimizer.step()
