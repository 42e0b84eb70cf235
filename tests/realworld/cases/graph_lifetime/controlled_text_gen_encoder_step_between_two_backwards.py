"""Toward controlled generation of text: e_opt.step() runs between two backward() calls through one shared graph.

source: https://github.com/GBLin5566/toward-controlled-generation-of-text-pytorch/issues/8
kind: bug
symptom: crash
verified: one of the variables needed for gradient computation has been modified by an inplace operation
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

max_features, emb_dim, z_dim, c_dim, maxlen = 12, 8, 6, 2, 5
lambda_c, lambda_z = 0.1, 0.1


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(max_features, emb_dim)
        self.rnn = nn.GRU(emb_dim, 2 * z_dim, batch_first=True)

    def forward(self, x, dont_pass_emb=False):
        _, h = self.rnn(x if dont_pass_emb else self.emb(x))
        self.z_mean, self.z_sigma = h[0, :, :z_dim], h[0, :, z_dim:].exp()
        return self.z_mean + self.z_sigma * torch.randn_like(self.z_mean)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(max_features, z_dim + c_dim)
        self.out = nn.Linear(z_dim + c_dim, max_features)
        self.word_emb = nn.Linear(max_features, emb_dim, bias=False)

    def forward(self, word, hidden):
        hidden = self.cell(word, hidden)
        pre_soft = self.out(hidden)
        return F.softmax(pre_soft / 0.1, dim=-1), hidden, pre_soft

    def one_hot_to_word_emb(self, one_hot):
        return self.word_emb(one_hot)


def latent_loss(z_mean, z_stddev):
    return 0.5 * torch.mean(z_mean ** 2 + z_stddev ** 2 - torch.log(z_stddev ** 2) - 1)


def train_vae_with_attr_loss(encoder, decoder, discriminator, e_opt, g_opt, x_train, y_train):
    for input_data, output_data in zip(x_train, y_train):
        encoder.zero_grad(); decoder.zero_grad()  # noqa: E702
        z = encoder(input_data)
        hidden = torch.cat([z, F.one_hot(output_data, c_dim).float()], dim=1)
        word, words, vae_loss = torch.zeros(len(input_data), max_features), [], 0
        for index in range(maxlen - 1):
            word, hidden, pre_soft = decoder(word, hidden)
            vae_loss += F.cross_entropy(pre_soft, input_data[:, index + 1])
            words.append(word)
        ll = latent_loss(encoder.z_mean, encoder.z_sigma)
        generated_sentence = torch.stack(words, dim=1)
        l_attr_c = F.cross_entropy(discriminator(generated_sentence.mean(1)), output_data)
        encoder(decoder.one_hot_to_word_emb(generated_sentence), dont_pass_emb=True)
        l_attr_z = latent_loss(encoder.z_mean, encoder.z_sigma)
        total_vae_loss, extra_decoder_loss = vae_loss + ll, lambda_c * l_attr_c + lambda_z * l_attr_z
        total_vae_loss.backward()  # ROOT
        e_opt.step()
        extra_decoder_loss.backward()  # SYMPTOM
        g_opt.step()


torch.manual_seed(0)
encoder, decoder, discriminator = Encoder(), Decoder(), nn.Linear(max_features, c_dim)
e_opt, g_opt = torch.optim.Adam(encoder.parameters(), lr=1e-3), torch.optim.Adam(decoder.parameters(), lr=1e-3)
x_train = [torch.randint(0, max_features, (4, maxlen)) for _ in range(2)]
y_train = [torch.randint(0, c_dim, (4,)) for _ in range(2)]
train_vae_with_attr_loss(encoder, decoder, discriminator, e_opt, g_opt, x_train, y_train)
