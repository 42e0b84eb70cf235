"""CMC deep-learning homework: CNNModel defines _init_ instead of __init__, so the model has no parameters.

source: https://github.com/mikeizbicki/cmc-csci181-deeplearning/issues/7
kind: bug
symptom: crash
verified: optimizer got an empty parameter list
"""
import argparse
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument('--hidden_layer_size', type=int, default=16)
parser.add_argument('--num_layers', type=int, default=2)
parser.add_argument('--input_length', type=int, default=10)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--learning_rate', type=float, default=1e-1)
parser.add_argument('--weight_decay', type=float, default=1e-4)
args = parser.parse_args([])
vocabulary = list("abcdefghijklmnopqrstuvwxyz")
all_categories = ["English", "Spanish", "Korean"]


class CNNModel(nn.Module):
    def _init_(self):  # ROOT
        super(CNNModel, self)._init_()
        self.relu = nn.ReLU()
        self.cnn = nn.Conv1d(len(vocabulary), args.hidden_layer_size, 3, padding=1)
        self.cnns = (args.num_layers - 1) * [nn.Conv1d(args.hidden_layer_size, args.hidden_layer_size, 3, padding=1)]
        self.fc = nn.Linear(args.hidden_layer_size * args.input_length, len(all_categories))

    def forward(self, x):
        out = torch.einsum('lbv->bvl', x)
        out = self.relu(self.cnn(out))
        for cnn in self.cnns:
            out = self.relu(cnn(out))
        out = out.view(args.batch_size, args.hidden_layer_size * args.input_length)
        return self.fc(out)


torch.manual_seed(0)
model = CNNModel()
optimizer = torch.optim.SGD(  # SYMPTOM
    model.parameters(),
    lr=args.learning_rate,
    weight_decay=args.weight_decay
)
x = torch.zeros(args.input_length, args.batch_size, len(vocabulary))
loss = nn.CrossEntropyLoss()(model(x), torch.zeros(args.batch_size, dtype=torch.long))
loss.backward()
optimizer.step()
