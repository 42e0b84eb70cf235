import torch
import torch.nn as nn


class NeuralNetRegressor:
    def __init__(self, module, optimizer=torch.optim.SGD, lr=0.05, max_epochs=5, **module_kwargs):
        self.module, self.optimizer, self.lr = module, optimizer, lr
        self.max_epochs, self.module_kwargs = max_epochs, module_kwargs
        self.initialized_ = False

    def initialize_module(self):
        self.module_ = self.module(**self.module_kwargs)
        return self

    def initialize_optimizer(self):
        self.optimizer_ = self.optimizer(self.module_.parameters(), lr=self.lr)
        return self

    def initialize(self):
        self.initialize_module()
        self.initialize_optimizer()
        self.initialized_ = True
        return self

    def train_step(self, xb, yb):
        self.optimizer_.zero_grad()
        loss = nn.functional.mse_loss(self.module_(xb), yb)
        loss.backward()
        self.optimizer_.step()
        return loss.item()

    def partial_fit(self, X, y):
        if not self.initialized_:
            self.initialize()
        for i in range(0, len(X), 16):
            self.train_step(X[i:i + 16], y[i:i + 16])
        return self

    def fit(self, X, y):
        if not self.initialized_:
            self.initialize()
        else:
            self.initialize_module()  # ROOT
        for _ in range(self.max_epochs):
            self.partial_fit(X, y)
        return self
