"""Soft-Masked BERT: self.mask_e = self.embedding(mask_token_id) is computed once in __init__, so every step backpropagates through that one graph; with retain_graph=True the second step finds the embedding LayerNorm weight changed by optimizer.step().

source: https://github.com/hiyoung123/SoftMaskedBert/issues/16
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size)
        self.token_type_embeddings = nn.Embedding(2, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)

    def forward(self, input_ids, token_type_ids=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        e = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        return self.LayerNorm(e)


class BiGRU(nn.Module):
    def __init__(self, embedding_size, hidden, n_layers):
        super().__init__()
        self.rnn = nn.GRU(embedding_size, hidden, num_layers=n_layers, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(hidden * 2, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return torch.sigmoid(self.linear(out))


class SoftMaskedBert(nn.Module):
    def __init__(self, embedding, encoder, mask_token_id, hidden, layer_n, vocab_size, embedding_size=32):
        super(SoftMaskedBert, self).__init__()
        self.embedding = embedding
        self.detector = BiGRU(embedding_size, hidden, layer_n)
        self.corrector = encoder
        mask_token_id = torch.tensor([[mask_token_id]])
        self.mask_e = self.embedding(mask_token_id)  # ROOT
        self.linear = nn.Linear(embedding_size, vocab_size)
        self.softmax = nn.LogSoftmax(dim=-1)

    def forward(self, input_ids, segment_ids):
        e = self.embedding(input_ids=input_ids, token_type_ids=segment_ids)
        p = self.detector(e)
        e_ = p * self.mask_e + (1 - p) * e
        h = self.corrector(e_) + e
        return self.softmax(self.linear(h)), p


torch.manual_seed(0)
vocab_size = 50
embedding = BertEmbeddings(vocab_size, 32)
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), num_layers=1)
model = SoftMaskedBert(embedding, encoder, mask_token_id=3, hidden=16, layer_n=1, vocab_size=vocab_size)
optim = torch.optim.Adam(model.parameters(), lr=2e-5)
criterion_c = nn.NLLLoss()
criterion_d = nn.BCELoss()
gama = 0.8
for step in range(3):
    input_ids = torch.randint(0, vocab_size, (2, 6))
    output_ids = torch.randint(0, vocab_size, (2, 6))
    label = torch.randint(0, 2, (2, 6)).float()
    out, prob = model(input_ids, torch.zeros_like(input_ids))
    loss_d = criterion_d(prob.squeeze(-1), label)
    loss_c = criterion_c(out.transpose(1, 2), output_ids)
    loss = gama * loss_c + (1 - gama) * loss_d
    optim.zero_grad()
    loss.backward(retain_graph=True)  # SYMPTOM
    optim.step()
