"""Qwen modeling_qwen.py (SDPA path, no flash-attention): when a padding attention_mask is given, attention_mask.masked_fill(~causal_mask, torch.finfo(query.dtype).min) is called without keeping its result, so the mask handed to scaled_dot_product_attention is not causal and every token attends to the tokens after it during training.

source: https://github.com/QwenLM/Qwen/issues/933
kind: bug
symptom: silent
verified: changing only the last token changes the attention output at the first position by 0.19 (max abs); with attention_mask = attention_mask.masked_fill(...) it does not move (0.0)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class QWenAttention(nn.Module):
    def __init__(self, hidden_size=16, num_heads=2):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.c_attn = nn.Linear(hidden_size, 3 * hidden_size)
        self.c_proj = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask=None):
        bsz, q_len, _ = hidden_states.size()
        mixed_x_layer = self.c_attn(hidden_states)
        query, key, value = mixed_x_layer.split(mixed_x_layer.size(-1) // 3, dim=2)
        query = query.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key = key.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value = value.view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        causal_mask = torch.tril(torch.ones((q_len, q_len), dtype=torch.bool)).view(1, 1, q_len, q_len)
        if attention_mask is not None:
            attention_mask = attention_mask.expand(-1, -1, causal_mask.size(2), -1)
            if causal_mask is not None:
                attention_mask.masked_fill(~causal_mask, torch.finfo(query.dtype).min)  # ROOT
        else:
            attention_mask = causal_mask
        attn_output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.c_proj(attn_output)


torch.manual_seed(0)
attn = QWenAttention()
hidden_states = torch.randn(1, 6, 16)
attention_mask = torch.zeros(1, 1, 1, 6)
out1 = attn(hidden_states, attention_mask)
hidden_states2 = hidden_states.clone()
hidden_states2[:, -1] = torch.randn(16)
out2 = attn(hidden_states2, attention_mask)
labels = torch.randn(1, 6, 16)
loss = F.mse_loss(out1, labels)
loss.backward()
print((out1[:, 0] - out2[:, 0]).abs().max().item())
