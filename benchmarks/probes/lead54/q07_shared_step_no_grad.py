import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)

    def _shared_step(self, batch):
        x, y = batch
        with torch.no_grad():  # ROOT
            logits = self(x)
        return F.cross_entropy(logits, y), (logits.argmax(-1) == y).float().mean()

    def training_step(self, batch):
        loss, acc = self._shared_step(batch)
        return loss

    def validation_step(self, batch):
        return self._shared_step(batch)


model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    batch = (torch.randn(8, 20), torch.randint(0, 4, (8,)))
    loss = model.training_step(batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
