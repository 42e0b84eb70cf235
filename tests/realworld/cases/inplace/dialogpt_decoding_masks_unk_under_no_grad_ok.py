"""DialoGPT-style sampling loop run under torch.no_grad(), as decoding usually is: the logits carry no graph, so banning [UNK] in place on each row obtained by iterating over them is allowed.

source: https://github.com/microsoft/DialoGPT/issues/57
kind: lookalike
verified: prints two sampled continuations of 4 tokens, none of them token 3
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyGPT(nn.Module):
    def __init__(self, vocab_size=30, d=16):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.block = nn.GRU(d, d, batch_first=True)
        self.lm_head = nn.Linear(d, vocab_size)

    def forward(self, input_ids):
        h, _ = self.block(self.wte(input_ids))
        return self.lm_head(h)


def generate(model, input_ids, unk_id, max_len=4):
    for _ in range(max_len):
        logits = model(input_ids)
        next_token_logits = logits[:, -1, :]
        for next_token_logit in next_token_logits:
            next_token_logit[unk_id] = -float('Inf')
        probs = F.softmax(next_token_logits, dim=-1)
        next_token = torch.multinomial(probs, num_samples=1)
        input_ids = torch.cat([input_ids, next_token], dim=1)
    return input_ids


torch.manual_seed(0)
model = TinyGPT()
model.eval()
context = torch.randint(0, 30, (2, 5))
with torch.no_grad():
    print(generate(model, context, unk_id=3))
