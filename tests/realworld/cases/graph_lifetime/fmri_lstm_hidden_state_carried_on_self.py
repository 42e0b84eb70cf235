"""fMRI LSTM: the forward feeds self.hidden back into the LSTM and stores the new state on self, batch after batch.

source: https://github.com/sgadgil6/cnslab_fmri/issues/4
kind: bug
symptom: crash
verified: Trying to backward through the graph a second time
"""
import torch
import torch.nn as nn


class fMRI_LSTM(nn.Module):
    def __init__(self, hidden_dim, input_dim, batch_size=4):
        super(fMRI_LSTM, self).__init__()
        self.hidden_dim, self.batch_size = hidden_dim, batch_size
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=1, batch_first=True)
        self.linear = nn.Linear(hidden_dim, 1)
        self.hidden = self.init_hidden()
        self.dropout = nn.Dropout(p=0.2)
        self.activate = nn.Sigmoid()

    def init_hidden(self):
        return (torch.randn(1, self.batch_size, self.hidden_dim), torch.randn(1, self.batch_size, self.hidden_dim))

    def forward(self, x):
        lstm_out, self.hidden = self.lstm(x, self.hidden)  # ROOT
        lstm_out = lstm_out.squeeze()[:, -1, :]
        out = self.dropout(lstm_out)
        return self.activate(self.linear(out))


torch.manual_seed(0)
model = fMRI_LSTM(hidden_dim=8, input_dim=6)
loss_fn = nn.BCELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.randn(4, 10, 6), torch.randint(0, 2, (4, 1)).float()) for _ in range(3)]
for epoch in range(1):
    for x, y in train_loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()  # SYMPTOM
        optimizer.step()
