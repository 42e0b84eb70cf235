import torch
from engine import CharModel, train_step

model = CharModel()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
stream = torch.randint(0, 30, (4, 5 * 9))
state = {}
for i in range(5):
    chunk = stream[:, i * 9:(i + 1) * 9]
    batch = {"x": chunk[:, :-1], "y": chunk[:, 1:]}
    state = train_step(model, opt, batch, state)
    print(state["loss"])
