"""pytorch-fm's AttentionalFactorizationMachine calls `F.dropout` on the attention scores and on the pooled interactions without `training=self.training`; functional dropout defaults to training=True, so `model.eval()` in the `test` helper does not switch it off and every evaluation pass drops and rescales attention weights at random, with no error.

source: https://github.com/rixwew/pytorch-fm/issues/21
kind: bug
symptom: silent
verified: after training, `test` runs the model under `model.eval()` and `torch.no_grad()`, yet two passes over the same validation batch give different predictions (max abs difference 0.13 on a 0..1 click probability) and different log-losses; in the look-alike (`training=self.training`) the two passes are identical
"""
import torch
import torch.nn.functional as F


class FeaturesEmbedding(torch.nn.Module):
    def __init__(self, field_dims, embed_dim):
        super().__init__()
        self.embedding = torch.nn.Embedding(sum(field_dims), embed_dim)
        self.offsets = torch.tensor([0, *torch.cumsum(torch.tensor(field_dims), 0)[:-1].tolist()])
        torch.nn.init.xavier_uniform_(self.embedding.weight.data)

    def forward(self, x):
        return self.embedding(x + self.offsets.unsqueeze(0))


class FeaturesLinear(torch.nn.Module):
    def __init__(self, field_dims, output_dim=1):
        super().__init__()
        self.fc = torch.nn.Embedding(sum(field_dims), output_dim)
        self.bias = torch.nn.Parameter(torch.zeros((output_dim,)))
        self.offsets = torch.tensor([0, *torch.cumsum(torch.tensor(field_dims), 0)[:-1].tolist()])

    def forward(self, x):
        return torch.sum(self.fc(x + self.offsets.unsqueeze(0)), dim=1) + self.bias


class AttentionalFactorizationMachine(torch.nn.Module):
    def __init__(self, embed_dim, attn_size, dropouts):
        super().__init__()
        self.attention = torch.nn.Linear(embed_dim, attn_size)
        self.projection = torch.nn.Linear(attn_size, 1)
        self.fc = torch.nn.Linear(embed_dim, 1)
        self.dropouts = dropouts

    def forward(self, x):
        num_fields = x.shape[1]
        row, col = list(), list()
        for i in range(num_fields - 1):
            for j in range(i + 1, num_fields):
                row.append(i), col.append(j)
        p, q = x[:, row], x[:, col]
        inner_product = p * q
        attn_scores = F.relu(self.attention(inner_product))
        attn_scores = F.softmax(self.projection(attn_scores), dim=1)
        attn_scores = F.dropout(attn_scores, p=self.dropouts[0])  # ROOT
        attn_output = torch.sum(attn_scores * inner_product, dim=1)
        attn_output = F.dropout(attn_output, p=self.dropouts[1])
        return self.fc(attn_output)


class AttentionalFactorizationMachineModel(torch.nn.Module):
    def __init__(self, field_dims, embed_dim, attn_size, dropouts):
        super().__init__()
        self.embedding = FeaturesEmbedding(field_dims, embed_dim)
        self.linear = FeaturesLinear(field_dims)
        self.afm = AttentionalFactorizationMachine(embed_dim, attn_size, dropouts)

    def forward(self, x):
        x = self.linear(x) + self.afm(self.embedding(x))
        return torch.sigmoid(x.squeeze(1))


def train(model, optimizer, batches, criterion):
    model.train()
    for fields, target in batches:
        y = model(fields)
        loss = criterion(y, target.float())
        model.zero_grad()
        loss.backward()
        optimizer.step()


def test(model, fields, target, criterion):
    model.eval()
    with torch.no_grad():
        y = model(fields)
        return y, criterion(y, target.float()).item()


torch.manual_seed(0)
field_dims = [10, 8, 6, 5]
fields = torch.stack([torch.randint(0, d, (256,)) for d in field_dims], dim=1)
target = (fields[:, 0] % 2 == fields[:, 1] % 2).long()
batches = [(fields[i:i + 32], target[i:i + 32]) for i in range(0, 256, 32)]

model = AttentionalFactorizationMachineModel(field_dims, embed_dim=16, attn_size=16, dropouts=(0.2, 0.2))
optimizer = torch.optim.Adam(params=model.parameters(), lr=1e-2)
criterion = torch.nn.BCELoss()
for epoch in range(5):
    train(model, optimizer, batches, criterion)

y1, loss1 = test(model, fields[:64], target[:64], criterion)
y2, loss2 = test(model, fields[:64], target[:64], criterion)
print("identical:", torch.equal(y1, y2), "max diff: %.3f" % (y1 - y2).abs().max().item(),
      "logloss %.4f vs %.4f" % (loss1, loss2))
