"""LSTM video classifier keeps `self.hidden` from init_hidden() and feeds it back on every forward (`lstm_out, self.hidden = self.lstm(x, self.hidden)`); the second batch's backward reaches into the first batch's freed graph through the carried hidden state.

source: https://github.com/pytorch/pytorch/issues/2769
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LSTM(nn.Module):
    def __init__(self, input_len=32, hidden_len=32, target_size=5, is_softmax=True):
        super(LSTM, self).__init__()
        self.hidden_len = hidden_len
        self.is_softmax = is_softmax
        self.lstm = nn.LSTM(input_len, hidden_len, batch_first=True)
        self.target_size = target_size
        self.hidden2class = nn.Linear(hidden_len, target_size)
        self.hidden = self.init_hidden()

    def init_hidden(self):
        return (torch.zeros(1, 1, self.hidden_len), torch.zeros(1, 1, self.hidden_len))

    def forward(self, x):
        lstm_out, self.hidden = self.lstm(x, self.hidden)  # ROOT
        cls_scores = self.hidden2class(lstm_out[:, -1, :]).view(-1, self.target_size)
        if self.is_softmax:
            cls_scores = F.log_softmax(cls_scores, dim=1)
        return cls_scores


def train(train_data, model, criterion, optimizer, epoch):
    model.train()
    for i, (input, target) in enumerate(train_data):
        output = model(input)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()  # SYMPTOM
        optimizer.step()


torch.manual_seed(0)
model = LSTM()
criterion = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
train_data = [(torch.randn(1, 12, 32), torch.randint(0, 5, (1,))) for _ in range(3)]
train(train_data, model, criterion, optimizer, 0)
