"""CustomizedLinear keeps its connectivity mask as a frozen nn.Parameter; the manual SGD loop updates every parameter.

source: https://github.com/uchida-takumi/CustomizedLinear/issues/2
kind: bug
symptom: crash
verified: TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class CustomizedLinear(nn.Module):
    def __init__(self, mask, bias=True):
        super(CustomizedLinear, self).__init__()
        self.input_features = mask.shape[0]
        self.output_features = mask.shape[1]
        self.mask = nn.Parameter(mask.t().float(), requires_grad=False)
        self.weight = nn.Parameter(torch.randn(self.output_features, self.input_features) * 0.1)
        self.bias = nn.Parameter(torch.zeros(self.output_features)) if bias else None

    def forward(self, input):
        return nn.functional.linear(input, self.weight * self.mask, self.bias)


mask = (torch.rand(4, 3) > 0.5).long()
model = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), CustomizedLinear(mask))
learning_rate = 1e-2
x, y = torch.randn(16, 5), torch.randn(16, 3)
for t in range(3):
    y_pred = model(x)
    loss = (y_pred - y).pow(2).sum()
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad  # ROOT
