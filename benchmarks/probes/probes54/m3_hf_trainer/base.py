import torch


class MiniTrainer:
    def __init__(self, model, train_data, lr=1e-3):
        self.model = model
        self.train_data = train_data
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def compute_loss(self, model, inputs, return_outputs=False):
        out = model(inputs["x"])
        loss = torch.nn.functional.cross_entropy(out, inputs["labels"])
        return (loss, out) if return_outputs else loss

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def train(self):
        for inputs in self.train_data:
            self.training_step(self.model, inputs)
            self.optimizer.step()
            self.optimizer.zero_grad()
