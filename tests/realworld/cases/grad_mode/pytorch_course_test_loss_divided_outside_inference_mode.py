"""PyTorch course test_step: test_loss is averaged after the inference_mode block, outside of it.

source: https://github.com/mrdbourke/pytorch-deep-learning/issues/397
kind: bug
symptom: crash
verified: Inplace update to inference tensor outside InferenceMode is not allowed
"""
import torch
from torch import nn


class FashionMNISTModelV1(nn.Module):
    def __init__(self, input_shape, hidden_units, output_shape):
        super().__init__()
        self.layer_stack = nn.Sequential(nn.Flatten(), nn.Linear(input_shape, hidden_units), nn.ReLU(),
                                         nn.Linear(hidden_units, output_shape), nn.ReLU())

    def forward(self, x):
        return self.layer_stack(x)


def accuracy_fn(y_true, y_pred):
    correct = torch.eq(y_true, y_pred).sum().item()
    return (correct / len(y_pred)) * 100


def train_step(model, data_loader, loss_fn, optimizer, accuracy_fn):
    train_loss, train_acc = 0, 0
    model.train()
    for batch, (X, y) in enumerate(data_loader):
        y_pred = model(X)
        loss = loss_fn(y_pred, y)
        train_loss += loss
        train_acc += accuracy_fn(y_true=y, y_pred=y_pred.argmax(dim=1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    train_loss /= len(data_loader)
    train_acc /= len(data_loader)
    print(f"Train loss: {train_loss:.5f} | Train accuracy: {train_acc:.2f}%")


def test_step(model, data_loader, loss_fn, accuracy_fn):
    test_loss, test_acc = 0, 0
    model.eval()
    with torch.inference_mode():
        for X, y in data_loader:
            test_pred = model(X)
            test_loss += loss_fn(test_pred, y)
            test_acc += accuracy_fn(y_true=y, y_pred=test_pred.argmax(dim=1))
    test_loss /= len(data_loader)  # ROOT
    test_acc /= len(data_loader)
    print(f"Test loss: {test_loss:.5f} | Test accuracy: {test_acc:.2f}%\n")


torch.manual_seed(42)
model_1 = FashionMNISTModelV1(input_shape=28 * 28, hidden_units=10, output_shape=10)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(params=model_1.parameters(), lr=0.1)
train_dataloader = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(3)]
test_dataloader = [(torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(2)]
for epoch in range(1):
    train_step(model_1, train_dataloader, loss_fn, optimizer, accuracy_fn)
    test_step(model_1, test_dataloader, loss_fn, accuracy_fn)
