import torch.nn.functional as F

from base_trainer import BaseTrainer


class Trainer(BaseTrainer):
    def _train_epoch(self, loader):
        for batch in loader:
            self.process_batch(batch)

    def process_batch(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        loss = F.mse_loss(self.model(x), y)
        loss.backward()
        self.step()
        return loss.item()
