"""The T5 adapter fine-tuning loop of the thread after the answer: model.add_adapter(task_name) and model.train_adapter(task_name) run first and the AdamW optimizer is built from model.parameters() afterwards, so it holds the adapter layers (the frozen base weights get no gradient and are skipped).

source: https://github.com/adapter-hub/adapters/issues/260
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BottleneckAdapter(nn.Module):
    def __init__(self, d_model, reduction_factor=4):
        super().__init__()
        self.adapter_down = nn.Linear(d_model, d_model // reduction_factor)
        self.adapter_up = nn.Linear(d_model // reduction_factor, d_model)
        nn.init.zeros_(self.adapter_up.weight)
        nn.init.zeros_(self.adapter_up.bias)

    def forward(self, hidden_states):
        return hidden_states + self.adapter_up(F.relu(self.adapter_down(hidden_states)))


class T5Block(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.layer_norm = nn.LayerNorm(d_model)
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.adapters = nn.ModuleDict()

    def forward(self, hidden_states, active_adapter=None):
        hidden_states = hidden_states + self.wo(F.relu(self.wi(self.layer_norm(hidden_states))))
        if active_adapter is not None:
            hidden_states = self.adapters[active_adapter](hidden_states)
        return hidden_states


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, vocab_size=32, d_model=32, d_ff=64, num_layers=3):
        super().__init__()
        self.shared = nn.Embedding(vocab_size, d_model)
        self.block = nn.ModuleList([T5Block(d_model, d_ff) for _ in range(num_layers)])
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.active_adapter = None

    def add_adapter(self, adapter_name, config=None):
        for layer in self.block:
            layer.adapters[adapter_name] = BottleneckAdapter(self.shared.embedding_dim)

    def train_adapter(self, adapter_name):
        for param in self.parameters():
            param.requires_grad = False
        for layer in self.block:
            for param in layer.adapters[adapter_name].parameters():
                param.requires_grad = True
        self.active_adapter = adapter_name

    def forward(self, input_ids, labels):
        hidden_states = self.shared(input_ids)
        for layer in self.block:
            hidden_states = layer(hidden_states, self.active_adapter)
        logits = self.lm_head(hidden_states)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


torch.manual_seed(0)
model = T5ForConditionalGeneration()
model.add_adapter("sst-2", config="pfeiffer")
model.train_adapter("sst-2")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
print("optimizer tensors", sum(len(g["params"]) for g in optimizer.param_groups))
up = model.block[0].adapters["sst-2"].adapter_up.weight
up0 = up.detach().clone()
input_ids, labels = torch.randint(0, 32, (8, 12)), torch.randint(0, 32, (8, 12))
for step in range(20):
    loss = model(input_ids, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step in (0, 19):
        print("step", step, "loss", loss.item())
print("adapter_up grad norm", up.grad.norm().item(), "moved", (up.detach() - up0).abs().max().item())
