"""The daisyRec-style NeuMF recommender after the pull request: forward returns the raw prediction and nn.BCEWithLogitsLoss applies the only sigmoid, so the 'CL' loss can reach zero and the model converges.

source: https://github.com/yudi-mars/daisyRec/pull/15
kind: lookalike
"""
import torch
import torch.nn as nn


class NeuMF(nn.Module):
    def __init__(self, user_num, item_num, factor_num=16, num_layers=2, dropout=0.0, loss_type="CL"):
        super().__init__()
        self.loss_type = loss_type
        self.embed_user_GMF = nn.Embedding(user_num, factor_num)
        self.embed_item_GMF = nn.Embedding(item_num, factor_num)
        self.embed_user_MLP = nn.Embedding(user_num, factor_num * (2 ** (num_layers - 1)))
        self.embed_item_MLP = nn.Embedding(item_num, factor_num * (2 ** (num_layers - 1)))
        MLP_modules = []
        for i in range(num_layers):
            input_size = factor_num * (2 ** (num_layers - i))
            MLP_modules += [nn.Dropout(p=dropout), nn.Linear(input_size, input_size // 2), nn.ReLU()]
        self.MLP_layers = nn.Sequential(*MLP_modules)
        self.predict_layer = nn.Linear(factor_num * 2, 1)
        for emb in (self.embed_user_GMF, self.embed_item_GMF, self.embed_user_MLP, self.embed_item_MLP):
            nn.init.normal_(emb.weight, std=0.01)
        if self.loss_type.upper() == "CL":
            self.criterion = nn.BCEWithLogitsLoss(reduction="mean")
        else:
            raise NotImplementedError(f"Invalid loss type: {loss_type}")

    def forward(self, user, item):
        output_GMF = self.embed_user_GMF(user) * self.embed_item_GMF(item)
        interaction = torch.cat((self.embed_user_MLP(user), self.embed_item_MLP(item)), -1)
        output_MLP = self.MLP_layers(interaction)
        concat = torch.cat((output_GMF, output_MLP), -1)
        prediction = self.predict_layer(concat)
        return prediction.view(-1)

    def calc_loss(self, batch):
        user, item, label = batch
        pred = self.forward(user, item)
        return self.criterion(pred, label.float())


torch.manual_seed(0)
user_num, item_num = 50, 80
model = NeuMF(user_num, item_num)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
users = torch.randint(0, user_num, (512,))
pos_items = (users * 7) % item_num
neg_items = torch.randint(0, item_num, (512,))
batch = (torch.cat([users, users]), torch.cat([pos_items, neg_items]),
         torch.cat([torch.ones(512), torch.zeros(512)]))
for step in range(40):
    loss = model.calc_loss(batch)
    optimizer.zero_grad()
    loss.backward()
    if step == 0:
        print("first loss", loss.item(), "item grad norm", model.embed_item_GMF.weight.grad.norm().item())
    optimizer.step()
with torch.no_grad():
    scores = model(batch[0], batch[1])
print("last loss", loss.item(), "pos-neg gap", (scores[:512].mean() - scores[512:].mean()).item())
