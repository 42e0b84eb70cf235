"""Context-aware recommender loads pretrained item embeddings with nn.Embedding.from_pretrained: frozen by default.

source: https://github.com/RUCAIBox/RecBole/issues/2046
kind: bug
symptom: silent
verified: item_embedding.weight.requires_grad is False; results identical with and without fine-tuning it
"""
import torch
import torch.nn as nn


class ContextRecommender(nn.Module):
    def __init__(self, n_users, pretrained_item_emb, embedding_size=8):
        super().__init__()
        self.user_embedding = nn.Embedding(n_users, embedding_size)
        self.item_embedding = nn.Embedding.from_pretrained(pretrained_item_emb)  # ROOT
        self.first_order_linear = nn.Linear(2 * embedding_size, 1)
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, user, item):
        u, i = self.user_embedding(user), self.item_embedding(item)
        fm = (u * i).sum(dim=1)
        return fm + self.first_order_linear(torch.cat([u, i], dim=1)).squeeze(1)

    def calculate_loss(self, interaction):
        return self.loss(self.forward(interaction['user_id'], interaction['item_id']), interaction['label'])


torch.manual_seed(0)
pretrained = torch.randn(20, 8)
model = ContextRecommender(n_users=10, pretrained_item_emb=pretrained)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(3):
    interaction = {'user_id': torch.randint(0, 10, (16,)), 'item_id': torch.randint(0, 20, (16,)),
                   'label': torch.randint(0, 2, (16,)).float()}
    optimizer.zero_grad()
    loss = model.calculate_loss(interaction)
    loss.backward()
    optimizer.step()
print("item embedding fine-tuned:", not torch.equal(model.item_embedding.weight, pretrained))
