"""pytorch-pretrained-BERT run_squad with --loss_scale: after backward every model parameter's gradient is divided by args.loss_scale, but BertForQuestionAnswering never uses the BERT pooler, whose .grad stays None.

source: https://github.com/huggingface/transformers/issues/43
kind: bug
symptom: crash
verified: AttributeError: 'NoneType' object has no attribute 'data'
"""
import argparse

import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss


class BertPooler(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, hidden_states):
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self, vocab=40, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.encoder = nn.TransformerEncoderLayer(hidden, 2, 32, batch_first=True)
        self.pooler = BertPooler(hidden)

    def forward(self, input_ids):
        sequence_output = self.encoder(self.embeddings(input_ids))
        return sequence_output, self.pooler(sequence_output)


class BertForQuestionAnswering(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.bert = BertModel(hidden=hidden)
        self.qa_outputs = nn.Linear(hidden, 2)

    def forward(self, input_ids, start_positions, end_positions):
        sequence_output, _ = self.bert(input_ids)
        logits = self.qa_outputs(sequence_output)
        start_logits, end_logits = logits.split(1, dim=-1)
        loss_fct = CrossEntropyLoss()
        start_loss = loss_fct(start_logits.squeeze(-1), start_positions)
        end_loss = loss_fct(end_logits.squeeze(-1), end_positions)
        return (start_loss + end_loss) / 2


parser = argparse.ArgumentParser()
parser.add_argument("--loss_scale", type=float, default=128.0)
parser.add_argument("--learning_rate", type=float, default=5e-5)
args = parser.parse_args([])

torch.manual_seed(0)
model = BertForQuestionAnswering()
optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
for step in range(2):
    input_ids = torch.randint(0, 40, (4, 12))
    start_positions, end_positions = torch.randint(0, 12, (4,)), torch.randint(0, 12, (4,))
    loss = model(input_ids, start_positions, end_positions)
    if args.loss_scale != 1.0:
        loss = loss * args.loss_scale
    loss.backward()
    if args.loss_scale != 1.0:
        for param in model.parameters():
            param.grad.data = param.grad.data / args.loss_scale  # ROOT
    optimizer.step()
    model.zero_grad()
