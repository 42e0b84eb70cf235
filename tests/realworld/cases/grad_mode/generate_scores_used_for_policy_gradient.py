"""Policy-gradient fine-tuning with the scores returned by generate(), which runs under @torch.no_grad().

source: https://github.com/huggingface/transformers/issues/3720
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab=20, dim=16):
        super().__init__()
        self.embed, self.rnn, self.lm_head = nn.Embedding(vocab, dim), nn.GRU(dim, dim, batch_first=True), nn.Linear(dim, vocab)

    def forward(self, input_ids):
        return self.lm_head(self.rnn(self.embed(input_ids))[0])

    @torch.no_grad()
    def generate(self, input_ids, max_length=6):
        scores = []
        for _ in range(max_length - input_ids.size(1)):
            logits = self(input_ids)[:, -1]
            scores.append(logits)
            next_token = torch.distributions.Categorical(logits=logits).sample()
            input_ids = torch.cat([input_ids, next_token[:, None]], dim=1)
        return input_ids, scores


def reward_fn(sequences):
    return (sequences == 3).float().sum(1)


torch.manual_seed(0)
model = TinyLM()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
prompt = torch.ones(4, 1, dtype=torch.long)
sequences, scores = model.generate(prompt)  # ROOT
log_probs = torch.stack([torch.log_softmax(s, -1).gather(1, sequences[:, i + 1, None]).squeeze(1)
                         for i, s in enumerate(scores)], 1)
loss = -(log_probs.sum(1) * reward_fn(sequences)).mean()
optimizer.zero_grad()
loss.backward()  # SYMPTOM
optimizer.step()
