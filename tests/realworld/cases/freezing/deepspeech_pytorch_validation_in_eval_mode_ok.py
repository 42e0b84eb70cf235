"""deepspeech.pytorch's train.py as fixed by the PR: model.eval() before the validation loop and model.train() at the start of each epoch.

source: https://github.com/SeanNaren/deepspeech.pytorch/pull/22
kind: lookalike
verified: the validation pass leaves every BatchNorm running statistic unchanged
"""
import torch
import torch.nn as nn


class SequenceWise(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        return self.module(x.reshape(t * n, -1)).view(t, n, -1)


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, batch_norm=True):
        super().__init__()
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = nn.GRU(input_size, hidden_size)

    def forward(self, x):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x, _ = self.rnn(x)
        return x


class DeepSpeech(nn.Module):
    def __init__(self, rnn_hidden_size=32, nb_layers=2, num_classes=29):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=(11, 11), stride=(2, 2), padding=(5, 5)),
            nn.BatchNorm2d(8), nn.Hardtanh(0, 20, inplace=True))
        rnn_input_size = 8 * 8
        rnns = [BatchRNN(rnn_input_size, rnn_hidden_size, batch_norm=False)]
        rnns += [BatchRNN(rnn_hidden_size, rnn_hidden_size) for _ in range(nb_layers - 1)]
        self.rnns = nn.Sequential(*rnns)
        self.fc = SequenceWise(nn.Sequential(nn.BatchNorm1d(rnn_hidden_size),
                                             nn.Linear(rnn_hidden_size, num_classes, bias=False)))

    def forward(self, x):
        x = self.conv(x)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3]).transpose(1, 2).transpose(0, 1).contiguous()
        x = self.rnns(x)
        return self.fc(x)


torch.manual_seed(0)
model = DeepSpeech()
criterion = nn.CTCLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=3e-4, momentum=0.9)
train_loader = [torch.randn(4, 1, 16, 40) for _ in range(3)]
test_loader = [torch.randn(4, 1, 16, 40) * 2 + 1 for _ in range(3)]
for epoch in range(1):
    model.train()
    for inputs in train_loader:
        out = model(inputs).log_softmax(-1)
        targets = torch.randint(1, 29, (4, 5))
        loss = criterion(out, targets, torch.full((4,), out.size(0)), torch.full((4,), 5))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    total_cer = 0
    for inputs in test_loader:
        with torch.no_grad():
            out = model(inputs)
        total_cer += out.argmax(-1).float().mean().item()
