"""The LRCN human-activity-recognition model ends its `output_layer` with `nn.Softmax(dim=-1)` while the training script scores it with `nn.CrossEntropyLoss`, which applies log-softmax itself; the loss is computed on probabilities squashed into [0, 1], so it cannot fall below log(1 + (C-1)/e) and its gradients shrink as the model gets confident, and training creeps along with no error.

source: https://github.com/doronharitan/human_activity_recognition_LRCN/issues/4
kind: bug
symptom: silent
verified: on a separable 4-class toy video task the training loss is stuck at 0.746 after 48 Adam steps (its floor with 4 classes is log(1 + 3/e) = 0.744) while the look-alike (softmax removed, which the reply in the report confirms helps) reaches 0.005 on the same data and seed
"""
import torch
import torch.nn as nn


class ConvEncoder(nn.Module):
    def __init__(self, latent_dim):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
        self.fc = nn.Linear(8 * 2 * 2, latent_dim)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))


class Lstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, lstm_layers, bidirectional):
        super().__init__()
        self.Lstm = nn.LSTM(latent_dim, hidden_size=hidden_size, num_layers=lstm_layers,
                            batch_first=True, bidirectional=bidirectional)

    def forward(self, x):
        output, _ = self.Lstm(x)
        return output


class ConvLstm(nn.Module):
    def __init__(self, latent_dim, hidden_size, lstm_layers, bidirectional, n_class):
        super().__init__()
        self.conv_model = ConvEncoder(latent_dim)
        self.Lstm = Lstm(latent_dim, hidden_size, lstm_layers, bidirectional)
        self.output_layer = nn.Sequential(
            nn.Linear(2 * hidden_size if bidirectional else hidden_size, n_class),
            nn.Softmax(dim=-1),  # ROOT
        )

    def forward(self, x):
        batch_size, timesteps, C, H, W = x.size()
        conv_input = x.view(batch_size * timesteps, C, H, W)
        conv_output = self.conv_model(conv_input)
        lstm_input = conv_output.view(batch_size, timesteps, -1)
        lstm_output = self.Lstm(lstm_input)
        lstm_output = lstm_output[:, -1, :]
        return self.output_layer(lstm_output)


def train_model(model, dataloader, optimizer, criterion):
    model.train()
    for images, labels in dataloader:
        optimizer.zero_grad()
        output = model(images)
        loss = criterion(output, labels)
        loss.backward()
        optimizer.step()
    return loss.item()


torch.manual_seed(0)
n_class = 4
labels = torch.randint(0, n_class, (64,))
videos = torch.randn(64, 4, 3, 8, 8) * 0.3
videos[torch.arange(64), :, labels % 3] += 1.0 + (labels >= 3).float()[:, None, None, None]
dataloader = [(videos[i:i + 16], labels[i:i + 16]) for i in range(0, 64, 16)]
model = ConvLstm(latent_dim=32, hidden_size=32, lstm_layers=1, bidirectional=False, n_class=n_class)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()
for epoch in range(12):
    loss = train_model(model, dataloader, optimizer, criterion)
print("train loss %.3f" % loss)
