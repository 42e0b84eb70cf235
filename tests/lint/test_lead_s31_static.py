"""Session 31 lead, static: GT218 for a loss term computed under no_grad from values that
carry a graph (NOTE [term read under no_grad]); GT522 per block of a script."""
import textwrap

from gradtrace.lint import check_source


def codes(src, code):
    return [(f.line, f.related[0].line) for f in check_source(textwrap.dedent(src))
            if f.code == code]


HEAD = '''\
import torch
import torch.nn.functional as F
'''

TERM_FROM_LIVE = HEAD + '''
def train_step(encoder, classifier, critic, x, y, d, opt):
    feats = encoder(x)
    cls_loss = F.cross_entropy(classifier(feats), y)
    with torch.no_grad():
        domain_loss = F.binary_cross_entropy_with_logits(critic(feats), d)
    loss = cls_loss + 0.1 * domain_loss
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_term_read_under_no_grad_from_a_live_value_is_named_at_the_block():
    assert codes(TERM_FROM_LIVE, "GT218") == [(7, 5)]


def test_the_same_term_computed_with_grad_is_silent():
    src = TERM_FROM_LIVE.replace("    with torch.no_grad():\n        domain_loss",
                                 "    if True:\n        domain_loss")
    assert codes(src, "GT218") == []


METHOD = HEAD + '''
class Trainer:
    def step(self, x, y):
        out = self.model(x)
        ce = F.cross_entropy(out, y)
        with torch.inference_mode():
            reg = out.pow(2).mean()
        loss = ce + 1e-3 * reg
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
'''


def test_inference_mode_term_in_a_method_is_named():
    assert codes(METHOD, "GT218") == [(8, 6)]


def test_no_grad_targets_and_data_terms_are_silent():
    target = HEAD + '''
def train_step(model, x, x2, y, opt):
    out = model(x)
    with torch.no_grad():
        t = out.softmax(-1)
    loss = F.cross_entropy(out, y) + F.mse_loss(model(x2).softmax(-1), t)
    loss.backward()
    opt.step()
'''
    data_term = HEAD + '''
def train_step(model, x, y, prior, opt):
    out = model(x)
    with torch.no_grad():
        offset = prior.log().mean()
    loss = F.cross_entropy(out, y) + offset
    loss.backward()
    opt.step()
'''
    metric = HEAD + '''
def train_step(model, x, y, opt):
    out = model(x)
    loss = F.cross_entropy(out, y)
    with torch.no_grad():
        acc = (out.argmax(1) == y).float().mean()
    loss.backward()
    opt.step()
    return acc
'''
    rebound = HEAD + '''
def train_step(model, teacher, x, y, opt):
    out = model(x)
    with torch.no_grad():
        out = teacher(x)
        kd = out.pow(2).mean()
    loss = F.cross_entropy(model(x), y) + kd
    loss.backward()
    opt.step()
'''
    for src in (target, data_term, metric, rebound):
        assert codes(src, "GT218") == [], src


PERCEPTUAL = HEAD + '''
def train(G, vgg, opt, loader):
    for lr_img, hr_img in loader:
        fake = G(lr_img)
        l1 = F.l1_loss(fake, hr_img)
        with torch.no_grad():
            f_fake = vgg(fake)
            f_real = vgg(hr_img)
        loss = l1 + 0.01 * F.mse_loss(f_fake, f_real)
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def test_perceptual_features_of_the_output_under_no_grad_are_named():
    assert codes(PERCEPTUAL, "GT218") == [(8, 6)]


def test_perceptual_target_only_under_no_grad_is_silent():
    src = PERCEPTUAL.replace("            f_fake = vgg(fake)\n", "").replace(
        "F.mse_loss(f_fake, f_real)", "F.mse_loss(vgg(fake), f_real)")
    assert codes(src, "GT218") == []


def test_a_frozen_model_fed_the_loss_and_added_raw_is_silent():
    src = HEAD + '''
def train(train_model, noise_model, optimizer, loader):
    for batch in loader:
        out = train_model(**batch)
        with torch.no_grad():
            noise = noise_model(out.loss)
        loss = out.loss + noise
        loss.backward()
        optimizer.step()
'''
    assert codes(src, "GT218") == []


# NOTE [odd optimizer branch]: one arm of an optimizer's if/elif chain over another module's
# parameters than its sibling arms (DiffRec: `Adagrad(model.parameters())` among
# `Autoencoder.parameters()` arms) is named once, at that arm.
CHAIN = HEAD + '''
import torch.optim as optim


def main(args, model, Autoencoder, loader):
    if args.optimizer1 == 'Adagrad':
        optimizer1 = optim.Adagrad({first}.parameters(), lr=args.lr1)
    elif args.optimizer1 == 'Adam':
        optimizer1 = optim.Adam(Autoencoder.parameters(), lr=args.lr1)
    else:
        optimizer1 = optim.SGD(Autoencoder.parameters(), lr=args.lr1)
    if args.optimizer2 == 'Adagrad':
        optimizer2 = optim.Adagrad(model.parameters(), lr=args.lr2)
    elif args.optimizer2 == 'Adam':
        optimizer2 = optim.Adam(model.parameters(), lr=args.lr2)
    else:
        optimizer2 = optim.SGD(model.parameters(), lr=args.lr2)
    for x in loader:
        optimizer1.zero_grad()
        optimizer2.zero_grad()
        loss = model(Autoencoder(x)).pow(2).mean()
        loss.backward()
        optimizer1.step()
        optimizer2.step()
'''


def test_the_odd_arm_of_an_optimizer_chain_is_named_once():
    assert codes(CHAIN.format(first="model"), "GT406") == [(9, 15)]


def test_a_chain_whose_arms_agree_is_silent():
    assert codes(CHAIN.format(first="Autoencoder"), "GT406") == []
