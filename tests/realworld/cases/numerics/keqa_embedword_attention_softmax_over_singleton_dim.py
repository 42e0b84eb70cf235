"""KEQA EmbedWord: self.attn(torch.cat((x, outputs), 1)) scores each of the seq_len * batch_size word positions with one number, a (seq_len * batch_size, 1) tensor, and F.softmax(..., dim=1) normalizes over that single column, so every attention weight is 1.0 and the attention scorer gets no gradient.

source: https://github.com/DEEP-PolyU/KEQA_WSDM19/issues/2
kind: bug
symptom: silent
verified: all 24 attention weights are 1.0 and after backward the attn scorer's weights have a zero gradient (max abs 0.0); normalizing over the positions (dim=0, the maintainer's fix) gives them a gradient (max abs 0.00085)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class EmbedWord(nn.Module):
    def __init__(self, words_num=50, words_dim=16, hidden_size=8, rel_label=6):
        super(EmbedWord, self).__init__()
        self.embed = nn.Embedding(words_num, words_dim)
        self.gru = nn.GRU(input_size=words_dim, hidden_size=hidden_size, num_layers=1, bidirectional=True)
        self.nonlinear = nn.Tanh()
        self.attn = nn.Sequential(nn.Linear(hidden_size * 2 + words_dim, hidden_size), self.nonlinear, nn.Linear(hidden_size, 1))
        self.hidden2tag = nn.Sequential(nn.Linear(hidden_size * 2 + words_dim, rel_label))

    def forward(self, text):
        x = self.embed(text)
        num_word, batch_size, words_dim = x.size()
        outputs, ht = self.gru(x)
        outputs = outputs.view(-1, outputs.size(2))
        x = x.view(-1, words_dim)
        attn_weights = F.softmax(self.attn(torch.cat((x, outputs), 1)), dim=1)  # ROOT
        attn_applied = torch.bmm(torch.diag(attn_weights[:, 0]).unsqueeze(0), outputs.unsqueeze(0))
        outputs = torch.cat((x, attn_applied.squeeze(0)), 1)
        tags = self.hidden2tag(outputs).view(num_word, batch_size, -1)
        scores = nn.functional.normalize(torch.sum(tags, dim=0), dim=1)
        return scores, attn_weights


torch.manual_seed(0)
model = EmbedWord()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
text = torch.randint(0, 50, (6, 4))
target = nn.functional.normalize(torch.randn(4, 6), dim=1)
scores, attn_weights = model(text)
loss = F.mse_loss(scores, target)
optimizer.zero_grad()
loss.backward()
optimizer.step()
print(attn_weights.min().item(), attn_weights.max().item(), model.attn[0].weight.grad.abs().max().item())
