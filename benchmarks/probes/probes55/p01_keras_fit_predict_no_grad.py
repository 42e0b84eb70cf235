import torch
import torch.nn as nn


class KerasLike:
    """A Keras-style wrapper: compile(), fit(), train_on_batch(), predict()."""

    def __init__(self, module):
        self.module = module

    def compile(self, optimizer="adam", loss=None, lr=1e-2):
        self.optimizer = torch.optim.Adam(self.module.parameters(), lr=lr)
        self.loss_fn = loss or nn.MSELoss()

    @torch.no_grad()  # ROOT
    def _forward(self, x):
        return self.module(x)

    def predict(self, x):
        self.module.eval()
        return self._forward(x)

    def train_on_batch(self, x, y):
        self.module.train()
        self.optimizer.zero_grad()
        loss = self.loss_fn(self._forward(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def fit(self, x, y, epochs=2, batch_size=8):
        for _ in range(epochs):
            for i in range(0, len(x), batch_size):
                self.train_on_batch(x[i:i + batch_size], y[i:i + batch_size])


net = KerasLike(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)))
net.compile(lr=1e-2)
X, Y = torch.randn(32, 4), torch.randn(32, 1)
net.fit(X, Y)
print(net.predict(X[:2]))
