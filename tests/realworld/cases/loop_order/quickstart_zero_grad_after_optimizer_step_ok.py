"""PyTorch quickstart training loop: loss.backward(), optimizer.step(), then optimizer.zero_grad() at the end of the iteration; the gradients are cleared before the next backward, which the maintainers prefer because it frees them during the next forward.

source: https://github.com/pytorch/tutorials/issues/2799
kind: lookalike
verified: each step's update uses only that batch's gradient (same weights as zeroing before backward)
"""
import torch
from torch import nn


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


def train(dataloader, model, loss_fn, optimizer):
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)

        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


torch.manual_seed(0)
model = NeuralNetwork()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
train_dataloader = [(torch.rand(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(4)]
for t in range(2):
    train(train_dataloader, model, loss_fn, optimizer)
print("Done!")
