"""torchMoji fine-tuning: forward returns outputs.data when it was given a LongTensor, so the loss has no grad_fn.

source: https://github.com/huggingface/torchMoji/issues/21
kind: bug
symptom: crash
verified: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
"""
import torch
import torch.nn as nn


class TorchMoji(nn.Module):
    def __init__(self, nb_classes, nb_tokens, embedding_dim=16, hidden_size=8):
        super(TorchMoji, self).__init__()
        self.embed = nn.Embedding(nb_tokens, embedding_dim)
        self.lstm_0 = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.output_layer = nn.Sequential(nn.Linear(2 * hidden_size, nb_classes), nn.Softmax(dim=1))

    def forward(self, input_seqs):
        return_numpy = False
        return_tensor = False
        if isinstance(input_seqs, (torch.LongTensor, torch.cuda.LongTensor)):
            return_tensor = True
        elif not torch.is_tensor(input_seqs):
            input_seqs = torch.from_numpy(input_seqs.astype('int64')).long()
            return_numpy = True
        x, _ = self.lstm_0(self.embed(input_seqs))
        outputs = self.output_layer(x.max(dim=1)[0])
        if return_tensor:
            outputs = outputs.data  # ROOT
        if return_numpy:
            outputs = outputs.data.numpy()
        return outputs


def fit_model(model, loss_op, optim_op, train_gen, epochs=1):
    for epoch in range(epochs):
        model.train()
        for X_train, y_train in train_gen:
            optim_op.zero_grad()
            output = model(X_train)
            loss = loss_op(output, y_train)
            loss.backward()  # SYMPTOM
            optim_op.step()


torch.manual_seed(0)
model = TorchMoji(nb_classes=2, nb_tokens=50)
loss_op = nn.BCELoss()
optim_op = torch.optim.Adam(model.parameters(), lr=1e-3)
train_gen = [(torch.randint(0, 50, (4, 7)), torch.randint(0, 2, (4, 2)).float()) for _ in range(2)]
fit_model(model, loss_op, optim_op, train_gen)
