"""EdgeConnect's EdgeModel.backward() as changed in the thread: both dis_loss.backward() and gen_loss.backward() run before either optimizer steps, so the generator's adversarial loss is backpropagated through the discriminator weights it was computed with.

source: https://github.com/knazeri/edge-connect/issues/188
kind: lookalike
"""
import torch
import torch.nn as nn
import torch.optim as optim


class AdversarialLoss(nn.Module):
    def __init__(self, type='nsgan'):
        super().__init__()
        self.criterion = nn.BCELoss()

    def forward(self, outputs, is_real, is_disc=None):
        labels = torch.ones_like(outputs) if is_real else torch.zeros_like(outputs)
        return self.criterion(outputs, labels)


class EdgeGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(True), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class Discriminator(nn.Module):
    def __init__(self, in_channels=2):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(in_channels, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2, inplace=True))
        self.conv2 = nn.Conv2d(16, 1, 4, stride=1, padding=1)

    def forward(self, x):
        conv1 = self.conv1(x)
        conv2 = self.conv2(conv1)
        return torch.sigmoid(conv2), [conv1, conv2]


class EdgeModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.generator = EdgeGenerator()
        self.discriminator = Discriminator(in_channels=2)
        self.l1_loss = nn.L1Loss()
        self.adversarial_loss = AdversarialLoss(type=config["GAN_LOSS"])
        self.gen_optimizer = optim.Adam(self.generator.parameters(), lr=config["LR"], betas=(0.0, 0.9))
        self.dis_optimizer = optim.Adam(self.discriminator.parameters(), lr=config["LR"] * config["D2G_LR"],
                                        betas=(0.0, 0.9))

    def process(self, images, edges, masks):
        self.gen_optimizer.zero_grad()
        self.dis_optimizer.zero_grad()
        outputs = self(images, edges, masks)
        gen_loss = 0
        dis_loss = 0

        # discriminator loss
        dis_input_real = torch.cat((images, edges), dim=1)
        dis_input_fake = torch.cat((images, outputs.detach()), dim=1)
        dis_real, dis_real_feat = self.discriminator(dis_input_real)
        dis_fake, dis_fake_feat = self.discriminator(dis_input_fake)
        dis_loss += (self.adversarial_loss(dis_real, True, True) + self.adversarial_loss(dis_fake, False, True)) / 2

        # generator adversarial loss
        gen_input_fake = torch.cat((images, outputs), dim=1)
        gen_fake, gen_fake_feat = self.discriminator(gen_input_fake)
        gen_loss += self.adversarial_loss(gen_fake, True, False)

        # generator feature matching loss
        gen_fm_loss = 0
        for i in range(len(dis_real_feat)):
            gen_fm_loss += self.l1_loss(gen_fake_feat[i], dis_real_feat[i].detach())
        gen_loss += gen_fm_loss * self.config["FM_LOSS_WEIGHT"]
        return outputs, gen_loss, dis_loss

    def forward(self, images, edges, masks):
        edges_masked = (edges * (1 - masks))
        images_masked = (images * (1 - masks)) + masks
        inputs = torch.cat((images_masked, edges_masked, masks), dim=1)
        return self.generator(inputs)

    def backward(self, gen_loss=None, dis_loss=None):
        if dis_loss is not None:
            dis_loss.backward()
        if gen_loss is not None:
            gen_loss.backward()
        self.dis_optimizer.step()
        self.gen_optimizer.step()


class EdgeConnect:
    def __init__(self, config):
        self.edge_model = EdgeModel(config)

    def train(self, batches):
        for images, edges, masks in batches:
            self.edge_model.train()
            outputs, gen_loss, dis_loss = self.edge_model.process(images, edges, masks)
            self.edge_model.backward(gen_loss, dis_loss)
            print("gen", gen_loss.item(), "dis", dis_loss.item())


torch.manual_seed(0)
config = {"LR": 1e-4, "D2G_LR": 0.1, "GAN_LOSS": "nsgan", "FM_LOSS_WEIGHT": 10.0}
batches = [(torch.rand(2, 1, 16, 16), (torch.rand(2, 1, 16, 16) > 0.8).float(),
            (torch.rand(2, 1, 16, 16) > 0.7).float()) for _ in range(2)]
EdgeConnect(config).train(batches)
