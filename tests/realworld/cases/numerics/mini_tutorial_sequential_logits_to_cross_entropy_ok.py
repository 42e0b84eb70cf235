"""PyTorch-Mini-Tutorials neural net after the fix: the Sequential ends with the second Linear layer and CrossEntropyLoss gets its logits.

source: https://github.com/vinhkhuc/PyTorch-Mini-Tutorials/issues/1
kind: lookalike
"""
import torch
from torch import optim


def build_model(input_dim, output_dim):
    model = torch.nn.Sequential()
    model.add_module("linear_1", torch.nn.Linear(input_dim, 64, bias=False))
    model.add_module("sigmoid_1", torch.nn.Sigmoid())
    model.add_module("linear_2", torch.nn.Linear(64, output_dim, bias=False))
    return model


def train(model, loss, optimizer, x_val, y_val):
    optimizer.zero_grad()
    fx = model.forward(x_val)
    output = loss.forward(fx, y_val)
    output.backward()
    optimizer.step()
    return output.item()


torch.manual_seed(42)
trX, trY = torch.randn(64, 100), torch.randint(0, 10, (64,))
n_examples, n_features = trX.size()
n_classes = 10
model = build_model(n_features, n_classes)
loss = torch.nn.CrossEntropyLoss(reduction='mean')
optimizer = optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
for i in range(100):
    cost = train(model, loss, optimizer, trX, trY)
print(cost)
