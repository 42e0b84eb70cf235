"""coRNN adding task: test() calls model.eval() and training never calls model.train(), but the model has no dropout or BN.

source: https://github.com/tk-rusch/coRNN/issues/1
kind: lookalike
verified: training in eval mode gives bit-identical weights to training in train mode (no mode-dependent layers)
"""
import torch
import torch.nn as nn


class coRNNCell(nn.Module):
    def __init__(self, n_inp, n_hid, dt, gamma, epsilon):
        super(coRNNCell, self).__init__()
        self.dt, self.gamma, self.epsilon = dt, gamma, epsilon
        self.i2h = nn.Linear(n_inp + n_hid + n_hid, n_hid)

    def forward(self, x, hy, hz):
        hz = hz + self.dt * (torch.tanh(self.i2h(torch.cat((x, hz, hy), 1))) - self.gamma * hy - self.epsilon * hz)
        hy = hy + self.dt * hz
        return hy, hz


class coRNN(nn.Module):
    def __init__(self, n_inp, n_hid, n_out, dt=0.042, gamma=2.7, epsilon=4.7):
        super(coRNN, self).__init__()
        self.n_hid = n_hid
        self.cell = coRNNCell(n_inp, n_hid, dt, gamma, epsilon)
        self.readout = nn.Linear(n_hid, n_out)

    def forward(self, x):
        hy = hz = x.new_zeros(x.size(1), self.n_hid)
        for t in range(x.size(0)):
            hy, hz = self.cell(x[t], hy, hz)
        return self.readout(hy)


def test(model, data):
    model.eval()
    with torch.no_grad():
        return nn.functional.mse_loss(model(data[0]), data[1]).item()


def run(call_test):
    torch.manual_seed(0)
    model = coRNN(2, 8, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    data = [(torch.randn(5, 4, 2), torch.randn(4, 1)) for _ in range(4)]
    for i, (x, y) in enumerate(data):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if call_test and i % 2 == 0:
            test(model, data[-1])
    return model.readout.weight.detach()


print(torch.equal(run(call_test=True), run(call_test=False)))
