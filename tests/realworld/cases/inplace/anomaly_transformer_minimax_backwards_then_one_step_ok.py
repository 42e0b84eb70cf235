"""Anomaly-Transformer's minimax training step as the repository keeps it after the issue: loss1.backward(retain_graph=True) and loss2.backward() both run on the untouched graph (the prior and series branches detached in turn) and a single self.optimizer.step() follows.

source: https://github.com/thuml/Anomaly-Transformer/issues/1
kind: lookalike
"""
import math

import numpy as np
import torch
import torch.nn as nn


def my_kl_loss(p, q):
    res = p * (torch.log(p + 0.0001) - torch.log(q + 0.0001))
    return torch.mean(torch.sum(res, dim=-1), dim=1)


class AnomalyAttention(nn.Module):
    def __init__(self, win_size, d_model, n_heads):
        super().__init__()
        self.n_heads, self.d_keys = n_heads, d_model // n_heads
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.sigma_projection = nn.Linear(d_model, n_heads)
        self.out_projection = nn.Linear(d_model, d_model)
        idx = torch.arange(win_size, dtype=torch.float)
        self.register_buffer("distances", (idx[:, None] - idx[None, :]).abs())

    def forward(self, x):
        B, L, _ = x.shape
        H, E = self.n_heads, self.d_keys
        queries = self.query_projection(x).view(B, L, H, E)
        keys = self.key_projection(x).view(B, L, H, E)
        values = self.value_projection(x).view(B, L, H, E)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys) / math.sqrt(E)
        series = torch.softmax(scores, dim=-1)
        sigma = self.sigma_projection(x).transpose(1, 2)  # B H L
        sigma = torch.pow(3, torch.sigmoid(sigma * 5) + 1e-5) - 1
        sigma = sigma.unsqueeze(-1).repeat(1, 1, 1, L)
        prior = 1.0 / (math.sqrt(2 * math.pi) * sigma) * torch.exp(-self.distances ** 2 / 2 / (sigma ** 2))
        out = torch.einsum("bhls,bshd->blhd", series, values).reshape(B, L, -1)
        return self.out_projection(out), series, prior, sigma


class AnomalyTransformer(nn.Module):
    def __init__(self, win_size, enc_in, c_out, d_model=32, n_heads=4, e_layers=2):
        super().__init__()
        self.embedding = nn.Linear(enc_in, d_model)
        self.attn_layers = nn.ModuleList([AnomalyAttention(win_size, d_model, n_heads) for _ in range(e_layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(e_layers)])
        self.projection = nn.Linear(d_model, c_out)

    def forward(self, x):
        enc_out = self.embedding(x)
        series_list, prior_list, sigma_list = [], [], []
        for attn, norm in zip(self.attn_layers, self.norms):
            new_x, series, prior, sigma = attn(enc_out)
            enc_out = norm(enc_out + new_x)
            series_list.append(series)
            prior_list.append(prior)
            sigma_list.append(sigma)
        return self.projection(enc_out), series_list, prior_list, sigma_list


class Solver(object):
    def __init__(self, win_size=20, input_c=5, k=3, lr=1e-4, num_epochs=1):
        self.win_size, self.k, self.num_epochs = win_size, k, num_epochs
        self.model = AnomalyTransformer(win_size=win_size, enc_in=input_c, c_out=input_c)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.criterion = nn.MSELoss()
        self.train_loader = [(torch.randn(8, win_size, input_c), torch.zeros(8, win_size)) for _ in range(4)]

    def train(self):
        for epoch in range(self.num_epochs):
            loss1_list = []
            self.model.train()
            for i, (input_data, labels) in enumerate(self.train_loader):
                self.optimizer.zero_grad()
                input = input_data.float()
                output, series, prior, _ = self.model(input)

                # calculate Association discrepancy
                series_loss = 0.0
                prior_loss = 0.0
                for u in range(len(prior)):
                    prior_norm = prior[u] / torch.unsqueeze(torch.sum(prior[u], dim=-1), dim=-1).repeat(1, 1, 1, self.win_size)
                    series_loss += (torch.mean(my_kl_loss(series[u], prior_norm.detach()))
                                    + torch.mean(my_kl_loss(prior_norm.detach(), series[u])))
                    prior_loss += (torch.mean(my_kl_loss(prior_norm, series[u].detach()))
                                   + torch.mean(my_kl_loss(series[u].detach(), prior_norm)))
                series_loss = series_loss / len(prior)
                prior_loss = prior_loss / len(prior)

                rec_loss = self.criterion(output, input)
                loss1_list.append((rec_loss - self.k * series_loss).item())
                loss1 = rec_loss - self.k * series_loss
                loss2 = rec_loss + self.k * prior_loss

                # Minimax strategy
                loss1.backward(retain_graph=True)
                loss2.backward()
                self.optimizer.step()
            print("Epoch: {0} | Train Loss: {1:.7f}".format(epoch + 1, np.average(loss1_list)))


torch.manual_seed(0)
Solver().train()
