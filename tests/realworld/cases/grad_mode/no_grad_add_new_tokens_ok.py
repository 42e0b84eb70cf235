"""Adding tokens under torch.no_grad() (the fix), then full fine-tuning the resized model.

source: https://github.com/unslothai/unsloth-zoo/pull/137
kind: lookalike
verified: every parameter, including the new rows, gets a gradient and changes
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self, vocab=10, dim=8):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, input_ids):
        return self.lm_head(torch.tanh(self.embed_tokens(input_ids)))


@torch.no_grad()
def add_new_tokens(model, new_tokens):
    old = model.embed_tokens.weight
    mean = old.mean(0, keepdim=True)
    new_rows = mean + 0.01 * torch.randn(len(new_tokens), old.shape[1])
    model.embed_tokens.weight = nn.Parameter(torch.cat([old, new_rows]))
    old_head = model.lm_head.weight
    model.lm_head.weight = nn.Parameter(torch.cat([old_head, old_head.mean(0, keepdim=True)
                                                   .expand(len(new_tokens), -1)]))


model = TinyLM()
add_new_tokens(model, [f"<NEW_TOKEN_{i}>" for i in range(2)])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
input_ids = torch.randint(0, 12, (2, 6))
logits = model(input_ids[:, :-1])
loss = nn.functional.cross_entropy(logits.reshape(-1, 12), input_ids[:, 1:].reshape(-1))
loss.backward()
optimizer.step()
print(all(p.grad is not None for p in model.parameters()))
