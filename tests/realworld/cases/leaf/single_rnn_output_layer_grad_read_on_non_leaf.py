"""SingleRNN keeps its layer outputs on self (self.L2_Y = self.Why(self.L1_H)) and reads self.L2_Y.grad after backward to inspect the output-layer gradient; L2_Y is not a leaf and nothing asked autograd to retain its gradient, so the value read is None.

source: https://discuss.pytorch.org/t/trying-to-understand-why-output-of-nn-linear-for-output-layer-isnt-retaining/40116
kind: bug
symptom: silent
verified: after loss.backward() model.L2_Y.grad is None while model.Why.weight.grad is set
"""
import torch
import torch.nn as nn

device = torch.device('cpu')
type = torch.float
args = {'device': device, 'dtype': type}


class SingleRNN(nn.Module):
    def __init__(self, n_inputs, n_outputsize):
        super(SingleRNN, self).__init__()
        numHU = 2
        bias = False
        self.Wxh = nn.Linear(in_features=n_inputs, out_features=numHU, bias=bias)
        self.Whh = nn.Linear(in_features=numHU + self.Wxh.out_features, out_features=numHU, bias=bias)
        self.Why = nn.Linear(in_features=numHU, out_features=n_outputsize, bias=bias)

    def forward(self, X0, H0):
        self.L0_X = self.Wxh(X0)
        self.L1_H = self.Whh(torch.cat((self.L0_X, H0), dim=1))
        self.L2_Y = self.Why(self.L1_H)  # ROOT
        return self.L2_Y, self.L1_H


torch.manual_seed(0)
model = SingleRNN(3, 1)
X0 = torch.randn(4, 3, **args)
H0 = torch.zeros(4, 2, **args)
Y, H1 = model(X0, H0)
loss = (Y - torch.ones(4, 1)).pow(2).mean()
loss.backward()
print(model.L2_Y.grad, model.Why.weight.grad is not None)
