"""Soft-argmax class index rounded to pick the regression output: the classifier never learns.

source: https://ai.stackexchange.com/questions/41264/how-to-do-backpropagation-with-argmax
kind: bug
symptom: silent
verified: net.classifier_fc1.weight.grad is None after backward
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SoftArgmax1D(nn.Module):
    def forward(self, x):
        smax = F.softmax(x * 100, dim=1)
        indices = torch.arange(x.size(1), dtype=x.dtype)
        return (smax * indices).sum(dim=1)


class CombinedNetwork(nn.Module):
    def __init__(self, input_size, hidden_size, num_classes):
        super().__init__()
        self.classifier_fc1 = nn.Linear(input_size, hidden_size)
        self.classifier_fc2 = nn.Linear(hidden_size, num_classes)
        self.regression_fc = nn.Linear(input_size, num_classes)
        self.smax = SoftArgmax1D()

    def forward(self, x):
        classifier_x = F.relu(self.classifier_fc1(x))
        classifier_x = self.classifier_fc2(classifier_x)
        classification_value = self.smax(classifier_x)
        regression_value = self.regression_fc(x)
        index = classification_value.round().long().unsqueeze(1)  # ROOT
        return regression_value.gather(1, index).squeeze(1)


net = CombinedNetwork(6, 16, 3)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
x, y = torch.randn(32, 6), torch.randn(32)
optimizer.zero_grad()
loss = F.mse_loss(net(x), y)
loss.backward()
optimizer.step()
print(net.classifier_fc1.weight.grad)
