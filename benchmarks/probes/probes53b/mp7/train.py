import torch
from models import CharRNN
from engine import train_tbptt

model = CharRNN()
opt = torch.optim.Adam(model.parameters(), 1e-3)
chunks = [(torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 5))) for _ in range(3)]
train_tbptt(model, opt, chunks)
