#!/usr/bin/env python
# coding: utf-8

# In[1]:


import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
vocab, dim, n_cls = 50, 16, 3
tokens = torch.randint(0, vocab, (64, 7))
labels = torch.randint(0, n_cls, (64,))


# In[2]:


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.head = nn.Linear(dim, n_cls)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(1))


model = BagOfWords()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


# In[3]:


# look at the embedding space before training
with torch.no_grad():  # ROOT
    emb = model.embed(tokens).mean(1)
print(emb.norm(dim=1)[:5])


# In[4]:


before = model.embed.weight.clone()
for epoch in range(20):
    logits = model.head(emb)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item(), (model.embed.weight - before).abs().max().item())
