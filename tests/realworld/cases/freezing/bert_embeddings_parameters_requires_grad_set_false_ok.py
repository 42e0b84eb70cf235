"""Freezing BERT's embeddings by setting requires_grad=False on every parameter of bert.embeddings (the fix from the thread): the embeddings stay fixed while the encoder and classifier train.

source: https://github.com/huggingface/transformers/issues/95
kind: lookalike
verified: after 3 Adam steps bert.embeddings.word_embeddings.weight is unchanged (0.0)
"""
import torch
import torch.nn as nn


class BertEmbeddings(nn.Module):
    def __init__(self, vocab_size=50, hidden=16, max_pos=12):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden)
        self.position_embeddings = nn.Embedding(max_pos, hidden)
        self.LayerNorm = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.shape[1])[None]
        return self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(pos))


class BertModel(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.embeddings = BertEmbeddings(hidden=hidden)
        self.encoder = nn.TransformerEncoderLayer(hidden, 2, 32, batch_first=True)

    def forward(self, input_ids):
        return self.encoder(self.embeddings(input_ids))


torch.manual_seed(0)
bert = BertModel()
classifier = nn.Linear(16, 2)
for param in bert.embeddings.parameters():
    param.requires_grad = False
for name, param in bert.named_parameters():
    if param.requires_grad and name.startswith("embeddings"):
        print(name)

optimizer = torch.optim.Adam(list(bert.parameters()) + list(classifier.parameters()), lr=1e-3)
before = bert.embeddings.word_embeddings.weight.detach().clone()
for _ in range(3):
    input_ids = torch.randint(0, 50, (4, 10))
    labels = torch.randint(0, 2, (4,))
    loss = nn.functional.cross_entropy(classifier(bert(input_ids)[:, 0]), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print((bert.embeddings.word_embeddings.weight - before).abs().max().item())
