"""PyTorch-NLP nn.Attention with the fix from the issue: nn.Softmax(dim=-1) normalizes each query's scores over the context positions, so the weights sum to 1 per query and the scoring layer is trained.

source: https://github.com/PetrochukM/PyTorch-NLP/issues/2
kind: lookalike
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
        self.softmax = nn.Softmax(dim=-1)
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
