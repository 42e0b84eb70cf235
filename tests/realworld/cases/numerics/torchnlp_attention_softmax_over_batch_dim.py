"""PyTorch-NLP nn.Attention reshapes the scores to (batch_size * output_len, query_len) and normalizes them with nn.Softmax(dim=0), across the batch-and-step rows instead of over the query positions, so with a single query every attention weight is exactly 1 and no gradient reaches the attention scores.

source: https://github.com/PetrochukM/PyTorch-NLP/issues/2
kind: bug
symptom: silent
verified: with batch 1 and one output step the attention weights over the 2 context positions are [1.0, 1.0] and the gradient reaching the attention scores is [0.0, 0.0]; with nn.Softmax(dim=-1) they are [0.54, 0.46]
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dimensions, attention_type='general'):
        super(Attention, self).__init__()
        self.attention_type = attention_type
        if self.attention_type == 'general':
            self.linear_in = nn.Linear(dimensions, dimensions, bias=False)
        self.linear_out = nn.Linear(dimensions * 2, dimensions, bias=False)
        self.softmax = nn.Softmax(dim=0)  # ROOT
        self.tanh = nn.Tanh()

    def forward(self, query, context):
        batch_size, output_len, dimensions = query.size()
        query_len = context.size(1)
        if self.attention_type == "general":
            query = query.view(batch_size * output_len, dimensions)
            query = self.linear_in(query)
            query = query.view(batch_size, output_len, dimensions)
        attention_scores = torch.bmm(query, context.transpose(1, 2).contiguous())
        attention_scores = attention_scores.view(batch_size * output_len, query_len)
        attention_weights = self.softmax(attention_scores)
        attention_weights = attention_weights.view(batch_size, output_len, query_len)
        mix = torch.bmm(attention_weights, context)
        combined = torch.cat((mix, query), dim=2)
        combined = combined.view(batch_size * output_len, 2 * dimensions)
        output = self.linear_out(combined).view(batch_size, output_len, dimensions)
        output = self.tanh(output)
        return output, attention_weights


torch.manual_seed(1)
atten = Attention(3)
a = torch.randn(1, 1, 3)
b = torch.randn(1, 2, 3)
output, weights = atten(a, b)
loss = (output - torch.randn(1, 1, 3)).pow(2).sum()
loss.backward()
print(weights, atten.linear_in.weight.grad.abs().max().item())
