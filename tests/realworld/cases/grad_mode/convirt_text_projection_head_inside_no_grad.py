"""ConVIRT image-text contrastive model: the frozen BERT text encoder runs in a `with torch.no_grad():` block, but the block also contains the trainable text projection head (the linear layers after the text embedding), so that head is in the optimizer and never receives a gradient.

source: https://github.com/edreisMD/ConVIRT-pytorch/issues/7
kind: bug
symptom: silent
verified: after training the text projection layers have .grad None and unchanged weights, while the image projection trains
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelCLR(nn.Module):
    def __init__(self, out_dim=16):
        super().__init__()
        self.res_features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                          nn.Flatten())
        self.res_l1 = nn.Linear(8, 8)
        self.res_l2 = nn.Linear(8, out_dim)
        self.bert_model = nn.Embedding(100, 12)  # frozen language model
        for param in self.bert_model.parameters():
            param.requires_grad = False
        self.bert_l1 = nn.Linear(12, 12)
        self.bert_l2 = nn.Linear(12, out_dim)

    def image_encoder(self, xis):
        h = self.res_features(xis)
        return self.res_l2(F.relu(self.res_l1(h)))

    def text_encoder(self, encoded_inputs):
        with torch.no_grad():
            sentence_embeddings = self.bert_model(encoded_inputs).mean(1)
            x = self.bert_l1(sentence_embeddings)  # ROOT
            x = F.relu(x)
            out_emb = self.bert_l2(x)
        return out_emb

    def forward(self, xis, xls):
        return self.image_encoder(xis), self.text_encoder(xls)


def nt_xent(zis, zls, temperature=0.1):
    zis, zls = F.normalize(zis, dim=1), F.normalize(zls, dim=1)
    logits = zis @ zls.t() / temperature
    labels = torch.arange(zis.size(0))
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


torch.manual_seed(0)
model = ModelCLR()
optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-3)
text_head_before = model.bert_l1.weight.detach().clone()
for step in range(3):
    xis, xls = torch.randn(4, 3, 16, 16), torch.randint(0, 100, (4, 6))
    zis, zls = model(xis, xls)
    loss = nt_xent(zis, zls)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.bert_l1.weight.grad, torch.equal(model.bert_l1.weight, text_head_before),
      model.res_l1.weight.grad is not None)
