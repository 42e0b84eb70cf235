"""transformers' run_lm_finetuning.py after the PR: train() resizes the token embeddings for the added tokens first and builds the AdamW parameter groups afterwards, so the optimizer holds the new (tied) embedding matrix and it trains.

source: https://github.com/huggingface/transformers/pull/3532
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import AdamW


class GPT2Model(nn.Module):
    def __init__(self, vocab_size, n_embd):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.h = nn.TransformerEncoderLayer(n_embd, 2, 4 * n_embd, batch_first=True)
        self.ln_f = nn.LayerNorm(n_embd)

    def forward(self, input_ids):
        causal = torch.triu(torch.full((input_ids.shape[1],) * 2, float("-inf")), diagonal=1)
        return self.ln_f(self.h(self.wte(input_ids), src_mask=causal))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab_size=40, n_embd=16):
        super().__init__()
        self.transformer = GPT2Model(vocab_size, n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.tie_weights()

    def tie_weights(self):
        self.lm_head.weight = self.transformer.wte.weight

    def resize_token_embeddings(self, new_num_tokens):
        old_embeddings = self.transformer.wte
        new_embeddings = nn.Embedding(new_num_tokens, old_embeddings.embedding_dim)
        num_tokens_to_copy = min(old_embeddings.num_embeddings, new_num_tokens)
        new_embeddings.weight.data[:num_tokens_to_copy, :] = old_embeddings.weight.data[:num_tokens_to_copy, :]
        self.transformer.wte = new_embeddings
        self.lm_head.out_features = new_num_tokens
        self.tie_weights()
        return self.transformer.wte

    def forward(self, input_ids, labels=None):
        lm_logits = self.lm_head(self.transformer(input_ids))
        shift_logits, shift_labels = lm_logits[:, :-1], labels[:, 1:]
        return (F.cross_entropy(shift_logits.reshape(-1, shift_logits.size(-1)), shift_labels.reshape(-1)),)


def train(train_batches, model, tokenizer_len, learning_rate=1e-3, weight_decay=0.0):
    model_to_resize = model.module if hasattr(model, "module") else model
    model_to_resize.resize_token_embeddings(tokenizer_len)
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = AdamW(optimizer_grouped_parameters, lr=learning_rate)
    wte_before = model.transformer.wte.weight.detach().clone()
    block_before = model.transformer.h.linear1.weight.detach().clone()
    model.zero_grad()
    for inputs in train_batches:
        model.train()
        outputs = model(inputs, labels=inputs)
        loss = outputs[0]
        loss.backward()
        optimizer.step()
        model.zero_grad()
    print("embedding moved", (model.transformer.wte.weight - wte_before).abs().max().item(),
          "new token rows moved", (model.transformer.wte.weight[40:] - wte_before[40:]).abs().max().item(),
          "block moved", (model.transformer.h.linear1.weight - block_before).abs().max().item(),
          "loss", loss.item())


torch.manual_seed(0)
model = GPT2LMHeadModel()
tokenizer_len = 44  # four special tokens added to the tokenizer
train_batches = [torch.randint(0, tokenizer_len, (4, 12)) for _ in range(20)]
train(train_batches, model, tokenizer_len)
