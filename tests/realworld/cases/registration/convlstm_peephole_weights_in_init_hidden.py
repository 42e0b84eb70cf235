"""ConvLSTM peephole weights Wci/Wcf/Wco are plain tensors made in init_hidden, not Parameters.

source: https://github.com/automan000/Convolutional_LSTM_PyTorch/issues/17
kind: bug
symptom: silent
verified: cell.Wci is not in model.parameters() and never changes during training
"""
import torch
import torch.nn as nn


class ConvLSTMCell(nn.Module):
    def __init__(self, input_channels, hidden_channels, kernel_size=3):
        super(ConvLSTMCell, self).__init__()
        self.hidden_channels = hidden_channels
        padding = kernel_size // 2
        self.Wxi = nn.Conv2d(input_channels, hidden_channels, kernel_size, 1, padding)
        self.Whi = nn.Conv2d(hidden_channels, hidden_channels, kernel_size, 1, padding, bias=False)
        self.Wxc = nn.Conv2d(input_channels, hidden_channels, kernel_size, 1, padding)
        self.Whc = nn.Conv2d(hidden_channels, hidden_channels, kernel_size, 1, padding, bias=False)
        self.Wci = None

    def forward(self, x, h, c):
        ci = torch.sigmoid(self.Wxi(x) + self.Whi(h) + c * self.Wci)
        cc = ci * torch.tanh(self.Wxc(x) + self.Whc(h)) + (1 - ci) * c
        return cc * 0.5, cc

    def init_hidden(self, batch_size, hidden, shape):
        if self.Wci is None:
            self.Wci = torch.zeros(1, hidden, shape[0], shape[1], requires_grad=True)  # ROOT
        return torch.zeros(batch_size, hidden, shape[0], shape[1]), torch.zeros(batch_size, hidden, shape[0], shape[1])


torch.manual_seed(0)
cell = ConvLSTMCell(2, 4)
x, target = torch.randn(3, 2, 6, 6), torch.randn(3, 4, 6, 6)
h, c = cell.init_hidden(3, 4, (6, 6))
opt = torch.optim.Adam(cell.parameters(), lr=1e-2)
for _ in range(3):
    opt.zero_grad()
    out, _ = cell(x, h, c + 1)
    ((out - target) ** 2).mean().backward()
    opt.step()
print(any(p is cell.Wci for p in cell.parameters()), cell.Wci.abs().sum().item())
