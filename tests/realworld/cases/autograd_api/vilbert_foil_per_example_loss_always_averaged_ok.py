"""vilbert-multi-task after the fix: run_foil.py averages the per-example FOIL loss on every device count (`loss = loss.mean()` outside the `n_gpu > 1` branch), so `backward()` gets a scalar on a single GPU or CPU as well.

source: https://github.com/facebookresearch/vilbert-multi-task/commit/181ae69d3aff7650351aa4032ab85e60fb079154
kind: lookalike
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class BertModel(nn.Module):
    """Stands in for the two-stream multi-modal BERT: a text and a visual stream, each pooled to a vector."""

    def __init__(self, vocab=100, hidden=16, v_feature_size=24, bi_hidden_size=16):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.t_pooler = nn.Linear(hidden, bi_hidden_size)
        self.v_embeddings = nn.Linear(v_feature_size + 5, hidden)
        self.v_pooler = nn.Linear(hidden, bi_hidden_size)

    def forward(self, input_ids, image_feat, image_loc, token_type_ids=None, attention_mask=None,
                image_attention_mask=None, output_all_encoded_layers=False):
        t = self.embeddings(input_ids)
        v = self.v_embeddings(torch.cat([image_feat, image_loc], -1))
        pooled_output_t = torch.tanh(self.t_pooler(t[:, 0]))
        pooled_output_v = torch.tanh(self.v_pooler(v[:, 0]))
        return t, v, pooled_output_t, pooled_output_v


class MultiModalBertForFoilClassification(nn.Module):
    def __init__(self, num_labels: int = 2, bi_hidden_size=16):
        super().__init__()
        self.num_labels = num_labels
        self.bert = BertModel(bi_hidden_size=bi_hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(bi_hidden_size, 2)
        self.loss_function = nn.CrossEntropyLoss(ignore_index=-1, reduction="none")

    def forward(self, input_ids, image_feat, image_loc, token_type_ids=None, attention_mask=None,
                image_attention_mask=None, labels=None):
        _, _, pooled_output_t, pooled_output_v = self.bert(
            input_ids, image_feat, image_loc, token_type_ids=token_type_ids, attention_mask=attention_mask,
            image_attention_mask=image_attention_mask, output_all_encoded_layers=False)
        # Do pointwise multiplication of "pooled" features from visual and textual encoders.
        pooled_output_multimodal = self.dropout(pooled_output_t * pooled_output_v)
        logits = self.classifier(pooled_output_multimodal)
        if labels is not None:
            return self.loss_function(logits.view(-1, self.num_labels), labels.view(-1))
        return logits


class Args:
    num_train_epochs = 1
    gradient_accumulation_steps = 1
    fp16 = False
    learning_rate = 1e-3


args = Args()
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
n_gpu = torch.cuda.device_count()
model = MultiModalBertForFoilClassification().to(device)
if n_gpu > 1:
    model = torch.nn.DataParallel(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
train_dataloader = [(torch.randn(4, 10, 24), torch.rand(4, 10, 5), torch.randint(0, 100, (4, 12)), torch.randint(0, 2, (4,)))
                    for _ in range(3)]

model.train()
for epochId in range(args.num_train_epochs):
    optimizer.zero_grad()
    for step, batch in enumerate(train_dataloader):
        batch = tuple(t.to(device=device, non_blocking=True) for t in batch)
        features, spatials, captions, targets = batch
        loss = model(captions, features, spatials, labels=targets)
        loss = loss.mean()
        if args.gradient_accumulation_steps > 1:
            loss = loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")
