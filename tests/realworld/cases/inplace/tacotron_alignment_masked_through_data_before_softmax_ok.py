"""tacotron_pytorch AttentionWrapper: padded encoder steps are masked with alignment.data.masked_fill_(mask, -inf) right before the softmax; the masked probabilities are exactly 0, so their gradient is 0 too and the result equals an autograd-visible mask.

source: https://github.com/r9y9/tacotron_pytorch/issues/16
kind: lookalike
verified: the gradients of every parameter equal those of the same step written with an out-of-place masked_fill
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BahdanauAttention(nn.Module):
    def __init__(self, dim):
        super(BahdanauAttention, self).__init__()
        self.query_layer = nn.Linear(dim, dim, bias=False)
        self.tanh = nn.Tanh()
        self.v = nn.Linear(dim, 1, bias=False)

    def forward(self, query, processed_memory):
        if query.dim() == 2:
            query = query.unsqueeze(1)
        processed_query = self.query_layer(query)
        alignment = self.v(self.tanh(processed_query + processed_memory))
        return alignment.squeeze(-1)


class AttentionWrapper(nn.Module):
    def __init__(self, rnn_cell, attention_mechanism, score_mask_value=-float("inf"), through_data=True):
        super(AttentionWrapper, self).__init__()
        self.rnn_cell = rnn_cell
        self.attention_mechanism = attention_mechanism
        self.score_mask_value = score_mask_value
        self.through_data = through_data

    def forward(self, query, attention, cell_state, memory, processed_memory=None, mask=None):
        cell_input = torch.cat((query, attention), -1)
        cell_output = self.rnn_cell(cell_input, cell_state)
        alignment = self.attention_mechanism(cell_output, processed_memory)
        if mask is not None:
            mask = mask.view(query.size(0), -1)
            if self.through_data:
                alignment.data.masked_fill_(mask, self.score_mask_value)
            else:
                alignment = alignment.masked_fill(mask, self.score_mask_value)
        alignment = F.softmax(alignment, dim=-1)
        attention = torch.bmm(alignment.unsqueeze(1), memory).squeeze(1)
        return cell_output, attention, alignment


def step_grads(through_data):
    torch.manual_seed(0)
    wrapper = AttentionWrapper(nn.GRUCell(8 + 8, 8), BahdanauAttention(8), through_data=through_data)
    memory = torch.randn(2, 5, 8)
    memory_lengths = torch.tensor([5, 3])
    mask = torch.arange(5)[None, :] >= memory_lengths[:, None]
    cell_output, attention, alignment = wrapper(torch.randn(2, 8), torch.zeros(2, 8), torch.zeros(2, 8), memory,
                                                processed_memory=memory, mask=mask)
    (cell_output.sum() + attention.pow(2).sum()).backward()
    return [p.grad.clone() for p in wrapper.parameters()]


print(all(torch.allclose(a, b) for a, b in zip(step_grads(True), step_grads(False))))
