"""OpenNRE's BagAttention (PCNN+ATT) after the fix of PR 262 builds the selective-attention query from the relation matrix itself, self.fc.weight[query], so the attention scores send gradient to the relation matrix as well as the final classification does.

source: https://github.com/thunlp/OpenNRE/pull/262
kind: lookalike
"""
import torch
from torch import nn


class SentenceEncoder(nn.Module):  # stands for OpenNRE's PCNN encoder: embeddings, mean pooling, a projection
    def __init__(self, vocab_size=60, hidden_size=16):
        super().__init__()
        self.hidden_size = hidden_size
        self.embed = nn.Embedding(vocab_size, 12)
        self.proj = nn.Linear(12, hidden_size)

    def forward(self, token, pos1, pos2, mask=None):
        return torch.tanh(self.proj(self.embed(token).mean(1)))


class BagAttention(nn.Module):  # BagRE base, id2rel and the inference branches left out
    def __init__(self, sentence_encoder, num_class, rel2id):
        super().__init__()
        self.sentence_encoder = sentence_encoder
        self.num_class = num_class
        self.fc = nn.Linear(self.sentence_encoder.hidden_size, num_class)
        self.softmax = nn.Softmax(-1)
        self.rel2id = rel2id
        self.drop = nn.Dropout(p=0.0)

    def forward(self, label, scope, token, pos1, pos2, mask=None, train=True, bag_size=0):
        token = token.view(-1, token.size(-1))
        pos1 = pos1.view(-1, pos1.size(-1))
        pos2 = pos2.view(-1, pos2.size(-1))
        rep = self.sentence_encoder(token, pos1, pos2)  # (nsum, H)
        # Attention (training, fixed bag size)
        batch_size = label.size(0)
        query = label.unsqueeze(1)  # (B, 1)
        att_mat = self.fc.weight[query]  # (B, 1, H)
        rep = rep.view(batch_size, bag_size, -1)
        att_score = (rep * att_mat).sum(-1)  # (B, bag)
        softmax_att_score = self.softmax(att_score)  # (B, bag)
        bag_rep = (softmax_att_score.unsqueeze(-1) * rep).sum(1)  # (B, H)
        bag_rep = self.drop(bag_rep)
        return self.fc(bag_rep)  # (B, N)


def full_attention_grad(model, label, token, pos, bag_size):  # the same loss with the query kept in the graph
    rep = model.sentence_encoder(token.view(-1, token.size(-1)), pos, pos).view(label.size(0), bag_size, -1)
    att_score = (rep * model.fc.weight[label.unsqueeze(1)]).sum(-1)
    bag_rep = (model.softmax(att_score).unsqueeze(-1) * rep).sum(1)
    loss = nn.functional.cross_entropy(model.fc(bag_rep), label)
    return torch.autograd.grad(loss, model.fc.weight)[0]


torch.manual_seed(0)
B, bag_size, L = 6, 4, 10
label = torch.randint(0, 5, (B,))
token = torch.randint(0, 60, (B, bag_size, L))
pos = torch.zeros(B * bag_size, L, dtype=torch.long)
model = BagAttention(SentenceEncoder(), num_class=5, rel2id={f"r{i}": i for i in range(5)})
with torch.no_grad():
    model.fc.weight.mul_(8.0)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
reference = full_attention_grad(model, label, token, pos, bag_size)
for step in range(20):
    logits = model(label, None, token, pos, pos, train=True, bag_size=bag_size)
    loss = criterion(logits, label)
    optimizer.zero_grad()
    loss.backward()
    if step == 0:
        print("fc.weight.grad norm:", round(model.fc.weight.grad.norm().item(), 4),
              "with the attention query in the graph:", round(reference.norm().item(), 4),
              "missing part:", round((reference - model.fc.weight.grad).norm().item(), 4))
    optimizer.step()
print("bag loss after 20 steps:", round(criterion(model(label, None, token, pos, pos, bag_size=bag_size), label).item(), 4))
