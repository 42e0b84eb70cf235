"""GRPO with several iterations per batch: completions generated under inference_mode are trained on.

source: https://github.com/huggingface/trl/issues/2983
kind: bug
symptom: crash
verified: RuntimeError: Inference tensors cannot be saved for backward.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.head(torch.tanh(self.embed(input_ids)))

    def generate(self, prompt_ids, max_new_tokens=4):
        ids = prompt_ids
        for _ in range(max_new_tokens):
            nxt = self(ids)[:, -1].softmax(-1).multinomial(1)
            ids = torch.cat([ids, nxt], dim=1)
        return ids


def _get_per_token_logps(model, input_ids):
    logits = model(input_ids[:, :-1])
    return torch.log_softmax(logits, -1).gather(2, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)


model = TinyLM()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
prompt_ids = torch.randint(0, 16, (2, 3))
with torch.inference_mode():  # ROOT
    prompt_completion_ids = model.generate(prompt_ids)
    old_per_token_logps = _get_per_token_logps(model, prompt_completion_ids)
advantages = torch.tensor([0.5, -0.5])
for iteration in range(2):
    per_token_logps = _get_per_token_logps(model, prompt_completion_ids)
    ratio = torch.exp(per_token_logps - old_per_token_logps)
    loss = -(ratio * advantages.unsqueeze(1)).mean()
    optimizer.zero_grad()
    loss.backward()  # SYMPTOM
    optimizer.step()
