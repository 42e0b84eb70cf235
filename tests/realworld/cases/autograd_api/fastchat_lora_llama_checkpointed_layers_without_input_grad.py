"""FastChat train_lora: LoRA on a frozen LLaMA with gradient checkpointing; the reentrant checkpoint sees no input that requires grad.

source: https://github.com/lm-sys/FastChat/issues/581
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint


class LoraLinear(nn.Linear):
    def __init__(self, in_features, out_features, r=4, lora_alpha=8):
        super().__init__(in_features, out_features, bias=False)
        self.lora_A = nn.Parameter(torch.randn(r, in_features) * 0.01)
        self.lora_B = nn.Parameter(torch.zeros(out_features, r))
        self.scaling = lora_alpha / r

    def forward(self, x):
        return F.linear(x, self.weight) + (x @ self.lora_A.t() @ self.lora_B.t()) * self.scaling


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.q_proj = LoraLinear(hidden_size, hidden_size)
        self.v_proj = LoraLinear(hidden_size, hidden_size)
        self.mlp = nn.Linear(hidden_size, hidden_size)

    def forward(self, hidden_states, attention_mask):
        q, v = self.q_proj(hidden_states), self.v_proj(hidden_states)
        scores = (q @ hidden_states.transpose(1, 2)) / hidden_states.shape[-1] ** 0.5 + attention_mask
        hidden_states = hidden_states + scores.softmax(-1) @ v
        return (hidden_states + self.mlp(hidden_states),)


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab=50, hidden_size=16, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden_size)
        self.layers = nn.ModuleList([LlamaDecoderLayer(hidden_size) for _ in range(layers)])
        self.lm_head = nn.Linear(hidden_size, vocab, bias=False)
        self.gradient_checkpointing = False

    def forward(self, input_ids, labels):
        hidden_states = self.embed_tokens(input_ids)
        seq = input_ids.shape[1]
        attention_mask = torch.full((seq, seq), float('-inf')).triu(1)
        for decoder_layer in self.layers:
            if self.gradient_checkpointing and self.training:
                def create_custom_forward(module):
                    def custom_forward(*inputs):
                        return module(*inputs)
                    return custom_forward
                layer_outputs = torch.utils.checkpoint.checkpoint(  # ROOT
                    create_custom_forward(decoder_layer), hidden_states, attention_mask, use_reentrant=True)
            else:
                layer_outputs = decoder_layer(hidden_states, attention_mask)
            hidden_states = layer_outputs[0]
        logits = self.lm_head(hidden_states)
        return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


torch.manual_seed(0)
model = LlamaForCausalLM()
for name, param in model.named_parameters():
    param.requires_grad = 'lora_' in name
model.gradient_checkpointing = True
model.train()
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
input_ids = torch.randint(0, 50, (2, 8))
loss = model(input_ids, labels=input_ids)
loss.backward()  # SYMPTOM
optimizer.step()
