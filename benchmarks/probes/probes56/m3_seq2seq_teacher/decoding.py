import random
import torch


def decode(decoder, h, tgt, bos, teacher_forcing=0.5):
    logits_all = []
    inp = torch.full((tgt.size(0),), bos, dtype=torch.long)
    for t in range(tgt.size(1)):
        h = h.detach()  # ROOT
        logits, h = decoder(inp, h)
        logits_all.append(logits)
        use_teacher = random.random() < teacher_forcing
        inp = tgt[:, t] if use_teacher else logits.argmax(-1)
    return torch.stack(logits_all, 1)
