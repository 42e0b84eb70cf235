"""The PyTorch quickstart tutorial's train() never calls model.train() although test() calls model.eval(), so from the second epoch on training runs in eval mode; its NeuralNetwork has no dropout or batch norm, so the mode changes nothing.

source: https://github.com/pytorch/tutorials/issues/1624
kind: lookalike
verified: the loss of a batch is identical in train and eval mode (torch.equal)
"""
import torch
from torch import nn


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


def train(dataloader, model, loss_fn, optimizer):
    for X, y in dataloader:
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def test(dataloader, model, loss_fn):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    return test_loss / len(dataloader), correct


torch.manual_seed(0)
model = NeuralNetwork()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
train_dataloader = [(torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(4)]
test_dataloader = [(torch.randn(16, 1, 28, 28), torch.randint(0, 10, (16,))) for _ in range(2)]
X, y = train_dataloader[0]
eval_loss = loss_fn(model.eval()(X), y)
train_loss = loss_fn(model.train()(X), y)
assert torch.equal(eval_loss, train_loss)
epochs = 3
for t in range(epochs):
    train(train_dataloader, model, loss_fn, optimizer)
    test(test_dataloader, model, loss_fn)
