"""Frozen LLM pathway: every parameter of the model is frozen and backward finds nothing to differentiate.

source: https://github.com/pyg-team/pytorch_geometric/pull/9996
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class LLM(nn.Module):
    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, tokens, labels):
        logits = self.lm_head(self.embed(tokens))
        return nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def train(llm, data_lists, epochs=1):
    for p in llm.parameters():
        p.requires_grad = False  # ROOT
    optimizer = torch.optim.AdamW(llm.parameters(), lr=1e-3)
    for _ in range(epochs):
        for tokens, labels in data_lists:
            optimizer.zero_grad()
            loss = llm(tokens, labels)
            loss.backward()  # SYMPTOM
            optimizer.step()


torch.manual_seed(0)
data_lists = [(torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 5)))]
train(LLM(), data_lists)
