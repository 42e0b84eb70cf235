"""Seq2seq translation tutorial: encoder and decoder each have their own optimizer, and both are stepped.

source: https://github.com/spro/practical-pytorch/issues/113
kind: lookalike
"""
import torch
import torch.nn as nn
from torch import optim


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        return self.gru(self.embedding(input).view(1, 1, -1), hidden)


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        output, hidden = self.gru(torch.relu(self.embedding(input).view(1, 1, -1)), hidden)
        return torch.log_softmax(self.out(output[0]), dim=1), hidden


def train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    encoder_hidden = torch.zeros(1, 1, 16)
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    for ei in range(input_tensor.size(0)):
        _, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
    decoder_input, decoder_hidden, loss = torch.tensor([[0]]), encoder_hidden, 0
    for di in range(target_tensor.size(0)):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden)
        loss += criterion(decoder_output, target_tensor[di])
        decoder_input = target_tensor[di]
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_tensor.size(0)


torch.manual_seed(0)
encoder, decoder = EncoderRNN(10, 16), DecoderRNN(16, 12)
encoder_optimizer = optim.SGD(encoder.parameters(), lr=0.01)
decoder_optimizer = optim.SGD(decoder.parameters(), lr=0.01)
criterion = nn.NLLLoss()
for it in range(3):
    pair = (torch.randint(0, 10, (5, 1)), torch.randint(0, 12, (4, 1)))
    train(pair[0], pair[1], encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
