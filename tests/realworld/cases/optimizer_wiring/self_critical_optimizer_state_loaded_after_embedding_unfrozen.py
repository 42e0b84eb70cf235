"""self-critical.pytorch: after unfreezing the GloVe embedding, the saved optimizer state no longer fits the new optimizer.

source: https://github.com/ruotianluo/self-critical.pytorch/issues/174
kind: bug
symptom: crash
verified: loaded state dict contains a parameter group that doesn't match the size of optimizer's group
"""
import argparse
import torch
import torch.nn as nn


class ShowTellModel(nn.Module):
    def __init__(self, vocab_size=20, input_encoding_size=300, rnn_size=16):
        super().__init__()
        self.embed = nn.Sequential(nn.Embedding(vocab_size, input_encoding_size), nn.ReLU())
        self.core = nn.LSTM(input_encoding_size, rnn_size, batch_first=True)
        self.logit = nn.Linear(rnn_size, vocab_size)

    def forward(self, seq):
        out, _ = self.core(self.embed(seq))
        return self.logit(out)


def build_optimizer(params, opt):
    return torch.optim.Adam(params, opt.learning_rate)


def train(opt, infos):
    model = ShowTellModel()
    model.embed[0].weight.requires_grad = opt.finetune_embed
    optimizer = build_optimizer([p for p in model.parameters() if p.requires_grad], opt)
    if opt.start_from is not None:
        optimizer.load_state_dict(infos['optimizer'])  # ROOT
    for iteration in range(2):
        seq = torch.randint(0, 20, (4, 6))
        loss = nn.functional.cross_entropy(model(seq[:, :-1]).transpose(1, 2), seq[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    infos['optimizer'] = optimizer.state_dict()
    return infos


torch.manual_seed(0)
infos = train(argparse.Namespace(learning_rate=5e-4, finetune_embed=False, start_from=None), {})
infos = train(argparse.Namespace(learning_rate=5e-4, finetune_embed=True, start_from='log_st'), infos)
