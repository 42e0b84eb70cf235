"""Fine-tuning only the GPT-2 LM head: freezing every parameter of model.transformer also freezes lm_head.weight, which is the same tensor as the tied token embedding, so nothing is left to train.

source: https://github.com/huggingface/transformers/issues/11903
kind: bug
symptom: crash
verified: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class GPT2Model(nn.Module):
    def __init__(self, vocab_size=50, n_embd=16, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(32, n_embd)
        self.h = nn.ModuleList([nn.TransformerEncoderLayer(n_embd, 2, 32, batch_first=True) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1])
        hidden_states = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            hidden_states = block(hidden_states)
        return self.ln_f(hidden_states)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab_size=50, n_embd=16):
        super().__init__()
        self.transformer = GPT2Model(vocab_size, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_word_embeddings

    def forward(self, input_ids, labels):
        logits = self.lm_head(self.transformer(input_ids))
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))


torch.manual_seed(0)
model = GPT2LMHeadModel()
for param in model.transformer.parameters():
    param.requires_grad = False  # ROOT
optimizer = torch.optim.AdamW([p for p in model.lm_head.parameters()], lr=5e-5)
input_ids = torch.randint(0, 50, (2, 12))
loss = model(input_ids, labels=input_ids)
loss.backward()  # SYMPTOM
optimizer.step()
