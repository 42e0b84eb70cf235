"""char-rnn classification: the RNN is instantiated a second time after the optimizer took the first one.

source: https://github.com/spro/practical-pytorch/issues/9
kind: bug
symptom: silent
verified: rnn.i2o.weight (the instance being trained) never changes; loss does not go down
"""
import torch
import torch.nn as nn

n_letters, n_hidden, n_categories = 6, 8, 3


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(input_size + hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        combined = torch.cat((input, hidden), 1)
        return self.softmax(self.i2o(combined)), self.i2h(combined)

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


torch.manual_seed(0)
rnn = RNN(n_letters, n_hidden, n_categories)
learning_rate = 0.005
optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)
criterion = nn.NLLLoss()


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    optimizer.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    optimizer.step()
    return output, loss.item()


rnn = RNN(n_letters, n_hidden, n_categories)  # ROOT
for iter in range(1, 20):
    line_tensor = torch.randn(4, 1, n_letters)
    category_tensor = torch.tensor([iter % n_categories])
    output, loss = train(category_tensor, line_tensor)
