"""Soft-Masked BERT gives the optimizer both softMaskedBert's and detector_model's parameters.

source: https://github.com/quantum00549/SoftMaskedBert/issues/7
kind: lookalike
"""
import torch
import torch.nn as nn


class BiGRUDetector(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.rnn = nn.GRU(hidden, hidden, batch_first=True, bidirectional=True)
        self.linear = nn.Linear(hidden * 2, 1)

    def forward(self, embed):
        out, _ = self.rnn(embed)
        return torch.sigmoid(self.linear(out))


class SoftMaskedBert(nn.Module):
    def __init__(self, vocab_size=100, hidden=32):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, hidden)
        self.mask_e = nn.Parameter(torch.randn(hidden))
        self.corrector = nn.TransformerEncoder(nn.TransformerEncoderLayer(hidden, 4, 64, batch_first=True), 1)
        self.linear = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids, prob):
        embed = self.embedding(input_ids)
        soft_embed = prob * self.mask_e + (1 - prob) * embed
        return self.linear(self.corrector(soft_embed) + embed)


torch.manual_seed(0)
softMaskedBert = SoftMaskedBert()
detector_model = BiGRUDetector()
optimizer = torch.optim.Adam(list(softMaskedBert.parameters()) + list(detector_model.parameters()), lr=1e-3)
criterion_c, criterion_d, gama = nn.CrossEntropyLoss(), nn.BCELoss(), 0.8
detector_before = detector_model.linear.weight.detach().clone()
for step in range(3):
    input_ids, output_ids = torch.randint(0, 100, (4, 12)), torch.randint(0, 100, (4, 12))
    label = (input_ids != output_ids).float().unsqueeze(-1)
    prob = detector_model(softMaskedBert.embedding(input_ids))
    out = softMaskedBert(input_ids, prob)
    loss = gama * criterion_c(out.reshape(-1, 100), output_ids.reshape(-1)) + (1 - gama) * criterion_d(prob, label)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((detector_model.linear.weight - detector_before).abs().max().item())
