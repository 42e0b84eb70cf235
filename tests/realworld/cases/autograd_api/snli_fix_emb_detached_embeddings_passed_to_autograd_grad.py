"""SNLI classifier with config.fix_emb: the premise/hypothesis embeddings are replaced by their .detach() in forward, then torch.autograd.grad(loss, [prem_embed, hypo_embed]) asks for gradients of tensors outside the graph.

source: https://github.com/pytorch/pytorch/issues/17124
kind: bug
symptom: crash
verified: One of the differentiated Tensors does not require grad
"""
import argparse

import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self, config):
        super(Encoder, self).__init__()
        self.rnn = nn.LSTM(input_size=config.d_proj, hidden_size=config.d_hidden, num_layers=1, batch_first=True)

    def forward(self, inputs):
        _, (ht, _) = self.rnn(inputs)
        return ht[-1]


class SNLIClassifier(nn.Module):
    def __init__(self, config):
        super(SNLIClassifier, self).__init__()
        self.config = config
        self.embed = nn.Embedding(config.n_embed, config.d_embed)
        self.projection = nn.Linear(config.d_embed, config.d_proj)
        self.encoder = Encoder(config)
        self.out = nn.Sequential(nn.Linear(2 * config.d_hidden, config.d_out))

    def forward(self, premise, hypothesis):
        prem_embed = self.embed(premise)
        hypo_embed = self.embed(hypothesis)
        if self.config.fix_emb:
            prem_embed = prem_embed.detach()  # ROOT
            hypo_embed = hypo_embed.detach()
        premise_enc = self.encoder(torch.relu(self.projection(prem_embed)))
        hypothesis_enc = self.encoder(torch.relu(self.projection(hypo_embed)))
        scores = self.out(torch.cat([premise_enc, hypothesis_enc], 1))
        return scores, prem_embed, hypo_embed


torch.manual_seed(0)
config = argparse.Namespace(n_embed=50, d_embed=8, d_proj=8, d_hidden=8, d_out=3, fix_emb=True)
model = SNLIClassifier(config)
criterion = nn.CrossEntropyLoss()
premise, hypothesis = torch.randint(0, 50, (4, 5)), torch.randint(0, 50, (4, 6))
label = torch.randint(0, 3, (4,))
answer, prem_embed, hypo_embed = model(premise, hypothesis)
loss = criterion(answer, label)
prem_grad, hypo_grad = torch.autograd.grad(loss, [prem_embed, hypo_embed])  # SYMPTOM
