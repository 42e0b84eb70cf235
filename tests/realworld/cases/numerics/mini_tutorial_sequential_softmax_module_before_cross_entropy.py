"""PyTorch-Mini-Tutorials neural net: build_model adds a torch.nn.Softmax module as the last layer of the Sequential and trains it with CrossEntropyLoss, which already does log-softmax, so the network is trained on softmax-of-softmax and its loss cannot go below the floor.

source: https://github.com/vinhkhuc/PyTorch-Mini-Tutorials/issues/1
kind: bug
symptom: silent
verified: after 100 SGD steps on one batch of 64 the loss is 1.72 (the floor of softmax-of-probabilities over 10 classes is log(1+9/e) = 1.46); without the Softmax module it reaches 0.00046
"""
import torch
from torch import optim


def build_model(input_dim, output_dim):
    model = torch.nn.Sequential()
    model.add_module("linear_1", torch.nn.Linear(input_dim, 64, bias=False))
    model.add_module("sigmoid_1", torch.nn.Sigmoid())
    model.add_module("linear_2", torch.nn.Linear(64, output_dim, bias=False))
    model.add_module("softmax", torch.nn.Softmax(dim=1))  # ROOT
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
