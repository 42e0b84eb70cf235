"""A Keras-like fit() clears the gradients between backward and step, so step() sees zeros."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.net = nn.Sequential(*layers)
        self.optimizer = None
        self.loss_fn = None

    def compile(self, optimizer_cls, loss_fn, **kw):
        self.optimizer = optimizer_cls(self.parameters(), **kw)
        self.loss_fn = loss_fn

    def forward(self, x):
        return self.net(x)

    def train_on_batch(self, x, y):
        self.train()
        loss = self.loss_fn(self(x), y)
        loss.backward()
        self.optimizer.zero_grad()  # ROOT
        self.optimizer.step()
        return float(loss)

    def fit(self, x, y, epochs=1, batch_size=16):
        history = []
        for _ in range(epochs):
            for i in range(0, len(x), batch_size):
                history.append(self.train_on_batch(x[i:i + batch_size], y[i:i + batch_size]))
        return history


if __name__ == "__main__":
    torch.manual_seed(0)
    m = Model([nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)])
    m.compile(torch.optim.SGD, nn.MSELoss(), lr=0.1)
    w0 = m.net[0].weight.detach().clone()
    m.fit(torch.randn(64, 4), torch.randn(64, 1), epochs=2)
    print("weights moved:", not torch.equal(w0, m.net[0].weight))
