"""DeepSpeed-Chat's get_optimizer_grouped_parameters with the PR's names list, compared lower-cased, so OPT's self_attn_layer_norm / final_layer_norm weights land in the no-decay group with the biases.

source: https://github.com/deepspeedai/DeepSpeedExamples/pull/755
kind: lookalike
verified: the decay group holds only the embedding, linear and lm_head weights
"""
import torch
import torch.nn as nn


class OPTDecoderLayer(nn.Module):
    def __init__(self, embed_dim=16):
        super().__init__()
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.fc1 = nn.Linear(embed_dim, 4 * embed_dim)
        self.fc2 = nn.Linear(4 * embed_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def forward(self, hidden_states):
        hidden_states = hidden_states + self.q_proj(self.self_attn_layer_norm(hidden_states))
        residual = hidden_states
        hidden_states = self.fc2(torch.relu(self.fc1(self.final_layer_norm(hidden_states))))
        return residual + hidden_states


class OPTModel(nn.Module):
    def __init__(self, vocab=50, embed_dim=16):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, embed_dim)
        self.layers = nn.ModuleList([OPTDecoderLayer(embed_dim)])
        self.final_layer_norm = nn.LayerNorm(embed_dim)
        self.lm_head = nn.Linear(embed_dim, vocab, bias=False)

    def forward(self, input_ids):
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = layer(h)
        return self.lm_head(self.final_layer_norm(h))


def get_optimizer_grouped_parameters(model, weight_decay, lora_lr=5e-4,
                                     no_decay_name_list=["bias", "layer_norm.weight", "layernorm.weight",
                                                         "norm.weight", "ln_f.weight"],
                                     lora_name_list=["lora_right_weight", "lora_left_weight"]):
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters()
                       if (not any(nd in n.lower() for nd in no_decay_name_list) and p.requires_grad
                           and not any(nd in n for nd in lora_name_list))],
            "weight_decay": weight_decay,
        },
        {
            "params": [p for n, p in model.named_parameters()
                       if (any(nd in n.lower() for nd in no_decay_name_list) and p.requires_grad)],
            "weight_decay": 0.0,
        },
    ]
    return [group for group in optimizer_grouped_parameters if group["params"]]


torch.manual_seed(0)
model = OPTModel()
optimizer_grouped_parameters = get_optimizer_grouped_parameters(model, weight_decay=0.1)
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=1e-2, betas=(0.9, 0.95))
for step in range(20):
    input_ids = torch.randint(0, 50, (4, 12))
    logits = model(input_ids[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 50), input_ids[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
