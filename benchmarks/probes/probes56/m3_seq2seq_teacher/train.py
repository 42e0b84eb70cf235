import torch
import torch.nn.functional as F
from models import Encoder, Decoder
from decoding import decode

V, D = 15, 16
enc, dec = Encoder(V, D), Decoder(V, D)
opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=1e-2)
e0 = enc.rnn.weight_hh_l0.detach().clone()
for step in range(4):
    src, tgt = torch.randint(1, V, (4, 7)), torch.randint(1, V, (4, 6))
    h = enc(src)[0]
    logits = decode(dec, h, tgt, bos=0)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("encoder moved", (enc.rnn.weight_hh_l0 - e0).abs().max().item())
