"""AllenNLP's BertForClassification after PR 2932 sets requires_grad = trainable on every parameter of the pretrained BERT, so with trainable=False only the classification layer is given to the optimizer and trained.

source: https://github.com/allenai/allennlp/pull/2932
kind: lookalike
"""
from types import SimpleNamespace
from typing import Dict

import torch


class BertModel(torch.nn.Module):  # stands for pytorch_pretrained_bert's BertModel: embeddings, one encoder layer, pooler
    def __init__(self, vocab_size=50, hidden_size=16):
        super().__init__()
        self.config = SimpleNamespace(hidden_size=hidden_size)
        self.embeddings = torch.nn.Embedding(vocab_size, hidden_size)
        self.token_type_embeddings = torch.nn.Embedding(2, hidden_size)
        self.encoder = torch.nn.TransformerEncoderLayer(hidden_size, 2, 32, dropout=0.0, batch_first=True)
        self.pooler = torch.nn.Sequential(torch.nn.Linear(hidden_size, hidden_size), torch.nn.Tanh())

    def forward(self, input_ids, token_type_ids, attention_mask):
        x = self.embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        sequence_output = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        return sequence_output, self.pooler(sequence_output[:, 0])


class BertForClassification(torch.nn.Module):  # allennlp's Model base, vocabulary and metrics left out
    def __init__(self, bert_model, dropout=0.0, num_labels=None, index="bert", trainable=True):
        super().__init__()
        self.bert_model = bert_model
        for param in self.bert_model.parameters():
            param.requires_grad = trainable
        in_features = self.bert_model.config.hidden_size
        self._dropout = torch.nn.Dropout(p=dropout)
        self._classification_layer = torch.nn.Linear(in_features, num_labels)
        self._loss = torch.nn.CrossEntropyLoss()
        self._index = index

    def forward(self, tokens: Dict[str, torch.LongTensor], label: torch.IntTensor = None):
        input_ids = tokens[self._index]
        token_type_ids = tokens[f"{self._index}-type-ids"]
        input_mask = (input_ids != 0).long()
        _, pooled = self.bert_model(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=input_mask)
        logits = self._classification_layer(self._dropout(pooled))
        output_dict = {"logits": logits, "probs": torch.nn.functional.softmax(logits, dim=-1)}
        if label is not None:
            output_dict["loss"] = self._loss(logits, label.long().view(-1))
        return output_dict


torch.manual_seed(0)
model = BertForClassification(BertModel(), num_labels=3, trainable=False)
parameters = [p for p in model.parameters() if p.requires_grad]  # what allennlp's Trainer gives the optimizer
optimizer = torch.optim.Adam(parameters, lr=1e-3)
bert_before = model.bert_model.embeddings.weight.detach().clone()
tokens = {"bert": torch.randint(1, 50, (8, 10)), "bert-type-ids": torch.zeros(8, 10, dtype=torch.long)}
label = torch.randint(0, 3, (8,))
for step in range(5):
    optimizer.zero_grad()
    loss = model(tokens, label)["loss"]
    loss.backward()
    optimizer.step()
print("trainable parameters given to the optimizer:", len(parameters), "of", len(list(model.parameters())))
print("BERT embedding change (max abs):", (model.bert_model.embeddings.weight - bert_before).abs().max().item())
