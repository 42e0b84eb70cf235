"""pitchtron's gradient reversal after its fix commit: GradientReversalLayer is a torch.autograd.Function applied with .apply, so autograd calls its static backward and the speaker loss reaches the GST encoder with its sign flipped (adversarial to speaker information).

source: https://github.com/hash2430/pitchtron/issues/3
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, text_embedding_dim, hidden_dim, num_speakers):
        super(Classifier, self).__init__()
        self.hidden = nn.Linear(text_embedding_dim, hidden_dim)
        self.output = nn.Linear(hidden_dim, num_speakers)

    def forward(self, x):
        x = self.hidden(x)
        x = nn.functional.relu(x)
        x = self.output(x)
        return x


backward_calls = []


class GradientReversalLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        backward_calls.append(1)
        return -1 * grad_output


def gradient_reversal_layer(x):
    grl = GradientReversalLayer.apply
    return grl(x)


class Tacotron2(nn.Module):  # encoder/decoder reduced to a reference encoder (GST) and a mel head
    def __init__(self, n_mel=16, token_embedding_size=8, n_speakers=4):
        super().__init__()
        self.gst = nn.Sequential(nn.Linear(n_mel, token_embedding_size), nn.Tanh())
        self.decoder = nn.Linear(token_embedding_size, n_mel)
        self.speaker_classifier = Classifier(token_embedding_size, 16, n_speakers)

    def forward(self, targets, reverse=True):
        embedded_gst_const = self.gst(targets)
        mel_outputs = self.decoder(embedded_gst_const)
        embedded_gst_grl = gradient_reversal_layer(embedded_gst_const) if reverse else embedded_gst_const
        speaker_predicted = self.speaker_classifier(embedded_gst_grl)
        return mel_outputs, speaker_predicted


torch.manual_seed(0)
model = Tacotron2()
mels, speaker_ids = torch.randn(32, 16), torch.randint(0, 4, (32,))
gst_weight = model.gst[0].weight
grads = {}
for reverse in (True, False):
    mel_outputs, speaker_predicted = model(mels, reverse=reverse)
    speaker_loss = F.cross_entropy(speaker_predicted, speaker_ids)
    grads[reverse] = torch.autograd.grad(speaker_loss, gst_weight)[0]
cosine = F.cosine_similarity(grads[True].flatten(), grads[False].flatten(), dim=0)
print("cosine(speaker-loss grad on GST through the GRL, without it):", round(cosine.item(), 4))
print("GradientReversalLayer.backward calls:", len(backward_calls))

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
mel_outputs, speaker_predicted = model(mels)
loss = F.mse_loss(mel_outputs, mels) + F.cross_entropy(speaker_predicted, speaker_ids)
optimizer.zero_grad()
loss.backward()
optimizer.step()
