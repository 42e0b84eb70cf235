"""Slot Attention: slots_mu and slots_log_sigma are registered as buffers, so the slot prior is never learned.

source: https://github.com/imbue-ai/slot_attention/issues/8
kind: bug
symptom: silent
verified: model.slot_attention.slots_mu never changes (a buffer gets no gradient)
"""
import torch
from torch import nn


class SlotAttention(nn.Module):
    def __init__(self, in_features, num_iterations, num_slots, slot_size, mlp_hidden_size, epsilon=1e-8):
        super().__init__()
        self.in_features, self.num_iterations = in_features, num_iterations
        self.num_slots, self.slot_size, self.epsilon = num_slots, slot_size, epsilon
        self.norm_inputs = nn.LayerNorm(self.in_features)
        self.project_q = nn.Linear(self.slot_size, self.slot_size, bias=False)
        self.project_k = nn.Linear(self.in_features, self.slot_size, bias=False)
        self.project_v = nn.Linear(self.in_features, self.slot_size, bias=False)
        self.gru = nn.GRUCell(self.slot_size, self.slot_size)
        self.mlp = nn.Sequential(nn.Linear(self.slot_size, mlp_hidden_size), nn.ReLU(),
                                 nn.Linear(mlp_hidden_size, self.slot_size))
        self.register_buffer("slots_mu", nn.init.xavier_uniform_(torch.zeros((1, 1, self.slot_size)), gain=nn.init.calculate_gain("linear")))  # ROOT
        self.register_buffer("slots_log_sigma", nn.init.xavier_uniform_(torch.zeros((1, 1, self.slot_size)), gain=nn.init.calculate_gain("linear")))

    def forward(self, inputs):
        batch_size = inputs.shape[0]
        inputs = self.norm_inputs(inputs)
        k, v = self.project_k(inputs), self.project_v(inputs)
        slots_init = torch.randn((batch_size, self.num_slots, self.slot_size))
        slots = self.slots_mu + self.slots_log_sigma.exp() * slots_init
        for _ in range(self.num_iterations):
            q = self.project_q(slots) * self.slot_size ** -0.5
            attn = torch.softmax(torch.matmul(k, q.transpose(2, 1)), dim=-1) + self.epsilon
            attn = attn / attn.sum(dim=1, keepdim=True)
            updates = torch.matmul(attn.transpose(1, 2), v)
            slots = self.gru(updates.reshape(-1, self.slot_size), slots.reshape(-1, self.slot_size))
            slots = slots.reshape(batch_size, self.num_slots, self.slot_size)
            slots = slots + self.mlp(slots)
        return slots


class SlotAttentionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 16)
        self.slot_attention = SlotAttention(16, num_iterations=2, num_slots=3, slot_size=16, mlp_hidden_size=32)
        self.decoder = nn.Linear(16, 3)

    def forward(self, x):
        slots = self.slot_attention(self.encoder(x))
        return self.decoder(slots).mean(1)


torch.manual_seed(0)
model = SlotAttentionModel()
optimizer = torch.optim.Adam(model.parameters(), lr=4e-4)
x = torch.rand(4, 10, 3)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), x.mean(1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
