"""TextGAN's RelationalMemory.multihead_attention splits qkv into q, k, v with torch.split and then scales the query in place (`q *= self.key_size ** -0.5`); split's outputs are views that may not be modified in place.

source: https://github.com/williamSYSU/TextGAN-PyTorch/pull/69
kind: bug
symptom: crash
verified: RuntimeError: Output 0 of SplitWithSizes is a view and is being modified inplace
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RelationalMemory(nn.Module):
    def __init__(self, mem_slots=1, head_size=16, input_size=8, num_heads=2, num_blocks=1):
        super().__init__()
        self.mem_slots = mem_slots
        self.head_size = head_size
        self.num_heads = num_heads
        self.mem_size = self.head_size * self.num_heads
        self.num_blocks = num_blocks
        self.key_size = self.head_size
        self.value_size = self.head_size
        self.qkv_size = 2 * self.key_size + self.value_size
        total_qkv_size = self.qkv_size * self.num_heads
        self.qkv_projector = nn.Linear(self.mem_size, total_qkv_size)
        self.qkv_layernorm = nn.LayerNorm([self.mem_slots + 1, total_qkv_size])
        self.attended_memory_layernorm = nn.LayerNorm([self.mem_slots + 1, self.mem_size])
        self.input_projector = nn.Linear(input_size, self.mem_size)

    def initial_state(self, batch_size):
        init_state = torch.stack([torch.eye(self.mem_slots) for _ in range(batch_size)])
        pad = torch.zeros((batch_size, self.mem_slots, self.mem_size - self.mem_slots))
        return torch.cat([init_state, pad], -1)

    def multihead_attention(self, memory):
        qkv = self.qkv_projector(memory)
        qkv = self.qkv_layernorm(qkv)
        mem_slots = memory.shape[1]
        qkv_reshape = qkv.view(qkv.shape[0], mem_slots, self.num_heads, self.qkv_size)
        qkv_transpose = qkv_reshape.permute(0, 2, 1, 3)
        q, k, v = torch.split(qkv_transpose, [self.key_size, self.key_size, self.value_size], -1)
        q *= (self.key_size ** -0.5)  # ROOT
        dot_product = torch.matmul(q, k.permute(0, 1, 3, 2))
        weights = F.softmax(dot_product, dim=-1)
        output = torch.matmul(weights, v)
        output_transpose = output.permute(0, 2, 1, 3).contiguous()
        return output_transpose.view((output_transpose.shape[0], output_transpose.shape[1], -1))

    def attend_over_memory(self, memory):
        for _ in range(self.num_blocks):
            attended_memory = self.multihead_attention(memory)
            memory = self.attended_memory_layernorm(memory + attended_memory)
        return memory

    def forward_step(self, inputs, memory):
        inputs = self.input_projector(inputs.view(inputs.shape[0], -1))
        inputs_reshape = inputs.unsqueeze(dim=1)
        memory_plus_input = torch.cat([memory, inputs_reshape], dim=1)
        next_memory = self.attend_over_memory(memory_plus_input)
        next_memory = next_memory[:, :-inputs_reshape.shape[1], :]
        return next_memory.view(next_memory.shape[0], -1), next_memory

    def forward(self, inputs, memory):
        memory = memory.detach()
        logits = []
        for idx_step in range(inputs.shape[1]):
            logit, memory = self.forward_step(inputs[:, idx_step], memory)
            logits.append(logit.unsqueeze(1))
        return torch.cat(logits, dim=1), memory


torch.manual_seed(0)
batch_size, seq_length, input_size = 4, 5, 8
model = RelationalMemory(input_size=input_size)
model_memory = model.initial_state(batch_size=batch_size)
random_input = torch.randn((batch_size, seq_length, input_size))
logits, next_memory = model(random_input, model_memory)
logits.pow(2).mean().backward()
