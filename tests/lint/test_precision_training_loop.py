"""GT5xx stays silent on shapes of correct code met in real projects (written fresh), and
still fires on the near-identical buggy shape next to each, so a silent rule cannot pass."""
from __future__ import annotations

import textwrap

import pytest

from gradtrace.lint import check_source


def gt5(src: str) -> list[tuple[int, str]]:
    found = check_source(textwrap.dedent(src), "shape.py", select=["GT5"])
    return sorted((f.line, f.code) for f in found)


SILENT = {
    # a loss module whose forward reads the shared value on one branch only, and the other
    # branch detaches: the call made with the other flag does not run through its graph
    "loss-module-branch-skips-the-shared-value": """
        import torch.nn as nn
        import torch.nn.functional as F
        class PairLoss(nn.Module):
            def __init__(self, critic):
                super().__init__()
                self.critic = critic
            def forward(self, real, fake, reg, which):
                if which == "gen":
                    return F.mse_loss(fake, real) + 0.1 * reg
                return self.critic(real).mean() - self.critic(fake.detach()).mean()
        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
                self.pair = PairLoss(nn.Linear(4, 1))
            def step(self, x, opt):
                fake = self.net(x)
                reg = fake.abs().mean()
                gen_loss = self.pair(x, fake, reg, "gen")
                gen_loss.backward()
                critic_loss = self.pair(x, fake, reg, "critic")
                critic_loss.backward()
                opt.step()
        """,
    # the same with a helper function: `extra` is read on one branch only
    "loss-helper-branch-skips-the-shared-value": """
        import torch
        def pair_loss(pred, target, extra, first):
            if first:
                return (pred - target).pow(2).mean() + extra
            return (pred.detach() - target).abs().mean()
        def train(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                out = model(x)
                extra = out.norm()
                pair_loss(out, y, extra, True).backward()
                pair_loss(out, y, extra, False).backward()
                opt.step()
        """,
    # the loop hands the optimizer to a helper of another file that may clear it
    "optimizer-handed-to-an-unknown-helper": """
        import torch
        def train(model, loader, optimizer, trainer):
            for batch in loader:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                trainer.finish_step(optimizer)
        """,
    # timm's loss scaler: the caller owns the optimizer (an argument) and clears it
    "scaler-helper-receives-the-optimizer": """
        import torch
        class NativeScaler:
            def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
                self._scaler.scale(loss).backward()
                if clip_grad is not None:
                    self._scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()
        """,
    # the step method is called by a method that clears the gradients first
    "step-method-called-after-clearing": """
        import torch
        class Agent:
            def learn(self, batches):
                for batch in batches:
                    self.optimizer.zero_grad()
                    self.update(batch)

            def update(self, batch):
                loss = self.criterion(self.net(batch.x), batch.y)
                loss.backward()
                self.optimizer.step()
        """,
    # a unit test: one step per test, nothing accumulates across calls
    "one-step-test-method": """
        import torch
        class TestTrainer:
            def test_step_changes_weights(self):
                loss = self.model(self.x).sum()
                loss.backward()
                self.optimizer.step()
                assert self.changed()
        """,
    # a step function that builds its optimizer: nothing left from the last call to add to
    "optimizer-built-per-call": """
        import torch
        def finetune(model, x, y):
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        """,
    # fine-tuning recipe: tensor running loss (needed for all_reduce), reset after each step
    "running-loss-reset-each-step": """
        import torch
        def train(self, loader):
            running_loss, num_tokens = 0, 0
            for idx, batch in enumerate(loader):
                logits = self._model(**batch)
                current_loss = self._loss_fn(logits, batch["labels"]) * 8
                running_loss += current_loss
                current_loss.backward()
                if (idx + 1) % self._accum == 0:
                    torch.distributed.all_reduce(running_loss)
                    self._optimizer.step()
                    self._optimizer.zero_grad(set_to_none=True)
                    print(running_loss.item())
                    running_loss = 0
        """,
    # attribute access on an unwrapped model object is configuration, not a graph
    "unwrapped-model-config-before-loop": """
        unwrapped = accelerator.unwrap_model(model)
        for it, batch in enumerate(dl):
            optimizer.zero_grad()
            outputs = model(**batch)
            loss = unwrapped.loss_function(logits=outputs.logits,
                                           vocab_size=unwrapped.config.vocab_size)
            accelerator.backward(loss)
            optimizer.step()
        """,
    # compiler code: symbols collected in a loop over "val"-named ranges
    "symbols-collected-in-a-loop": """
        import torch
        def codegen(self, ranges):
            names, masks = [], []
            for i, val_range in enumerate(ranges):
                sym = sympy.Symbol(f"x{i}", integer=True)
                names.append(sym)
                masks.append(self.make_mask(val_range, sym))
            return names, masks
        """,
    # an allocator sums block counts in a loop: not a tensor, not a graph
    "free-bytes-summed": """
        import torch
        def free_memory(self, allocators):
            free_bytes = 0
            for allocator in allocators:
                free_bytes += allocator.pool.count_free_blocks(allocator.index) * 4096
            return free_bytes
        """,
    # guidance regularisation in a sampler: the carried value is detached on every pass
    "sampler-regularisation-detached": """
        import torch
        for t in timesteps:
            noise_pred = unet(latents, t)
            with torch.enable_grad():
                for _ in range(steps):
                    var = noise_pred.detach().clone().requires_grad_(True)
                    loss = auto_corr_loss(var)
                    loss.backward()
                    noise_pred = noise_pred - 0.1 * var.grad.detach()
                    noise_pred = noise_pred.detach()
            latents = scheduler.step(noise_pred, t, latents).prev_sample
        """,
    # reversible layers drive backward by hand with retain_graph
    "reversible-backward-retained": """
        def backward_pass(self, attn_output, grad_attn_output, hidden, grad_hidden):
            for layer in reversed(self.layers):
                res = layer.feed_forward(attn_output)
                res.backward(grad_hidden, retain_graph=True)
                out = layer.attention(hidden)
                out.backward(grad_attn_output, retain_graph=True)
        """,
    # a precision plugin / fabric forwards backward to the engine: no loop, no rebinding
    "plugin-backward-forwarding": """
        def backward(self, tensor, model, optimizer, *args, **kwargs):
            model.backward(tensor, *args, **kwargs)
        def step(self, fabric, loss):
            fabric.backward(loss)
        """,
    # throughput probe: forward+backward repeated on fresh inputs, grads cleared each time
    "throughput-probe": """
        def measure(forward_fn, loss_fn, optimizer, n):
            for _ in range(n):
                optimizer.zero_grad()
                loss_fn(forward_fn()).backward()
                optimizer.step()
        """,
    # evaluation returning metrics, always called under no_grad in the same file
    "eval-called-under-no-grad": """
        import torch
        def _loop(model, data_loader):
            outs = []
            for batch in data_loader:
                outs.append(model(batch))
            return outs
        def predict(model, data_loader):
            with torch.inference_mode():
                return _loop(model, data_loader)
        """,
    # a frozen text encoder run once before the loop (DreamBooth-style prompt embeddings)
    "frozen-encoder-precomputed": """
        text_encoder.requires_grad_(False)
        prompt_embeds = text_encoder(prompt_ids)[0]
        for step, batch in enumerate(train_dataloader):
            pred = unet(batch["latents"], batch["t"], prompt_embeds)
            loss = mse(pred, batch["noise"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    # model code: a forward that encodes frame chunks and concatenates them (graph needed)
    "forward-collects-chunks": """
        import torch
        from torch import nn
        class VideoAutoencoder(nn.Module):
            def _encode(self, x, num_batches):
                enc = []
                for i in range(num_batches):
                    h = self.encoder(x[:, :, i * 8:(i + 1) * 8])
                    enc.append(h)
                return torch.cat(enc, dim=2)
            def motion(self, faces):
                face_batches = torch.split(faces, 4)
                outs = []
                for face_batch in face_batches:
                    outs.append(self.motion_encoder(face_batch))
                return torch.cat(outs)
        """,
    # data preparation: filterbank features of a dataset collected for statistics
    "feature-preparation-over-dataset": """
        import torch
        def prepare(dataset, audio_root):
            feature_list = []
            for waveform, sample_rate, utt_id in tqdm(dataset):
                features = extract_fbank_features(waveform, sample_rate, audio_root / utt_id)
                feature_list.append(features)
            return compute_stats(feature_list)
        """,
    # micro-batches: one clear before the loop and one step on the last micro-batch
    "step-on-last-micro-batch": """
        def train_step(model, micros, optimizer):
            optimizer.zero_grad()
            for i, micro in enumerate(micros):
                model(micro).mean().backward()
                if i == len(micros) - 1:
                    optimizer.step()
        """,
    # embeddings gathered over micro-batches, then one contrastive loss (GradCache-like)
    "collected-for-one-backward": """
        def train_step(model, loader, optimizer):
            embs = []
            for batch in loader:
                embs.append(model(batch))
            reps = torch.cat(embs)
            loss = contrastive(reps)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """,
    # argmax predictions and comparison counts carry no graph
    "eval-collects-predictions": """
        def evaluate(model, test_loader):
            preds, correct = [], 0
            for x, y in test_loader:
                out = model(x)
                _, pred = out.max(1)
                preds.append(pred)
                correct += (out.argmax(1) == y).sum()
            return preds, correct
        """,
    # scheduler and optimizer steps called, results not assigned; closure step assigned
    "closure-step-assigned": """
        for it in range(20):
            loss = optimizer.step(closure)
            scheduler.step()
        """,
    # corpus3 (stanza charlm): an alternative constructor (`Cls.from_new_model(args)`) builds
    # the trainer object before the loop; it runs no forward
    "trainer-built-by-an-alternative-constructor": """
        def train(args, vocab, batches):
            trainer = CharacterLanguageModelTrainer.from_new_model(args, vocab)
            for data, target in batches:
                trainer.optimizer.zero_grad()
                output, decoded = trainer.model.forward(data)
                loss = trainer.criterion(decoded, target)
                loss.backward()
                trainer.optimizer.step()
        """,
    # corpus2 (avalanche tests, torchrl PILCO): a model object built from a class whose name
    # starts with an acronym (`MTSimpleMLP`, `GPWorldModel`) is an object, not a forward pass
    "model-object-built-before-the-loop": """
        def test_lwf(lwf, bm):
            model = MTSimpleMLP(input_size=6)
            for exp in bm.train_stream:
                mb_x, mb_y = next(iter(exp.loader))
                loss = lwf(mb_x, model(mb_x), model)
                loss.backward()
        """,
    # corpus2 (MONAI GanTrainer): k discriminator steps on one generated batch; detaching the
    # fake is the job of the user's discriminator loss callback
    "discriminator-steps-on-one-generated-batch": """
        def _iteration(self, engine, batchdata):
            d_input = engine.prepare_batch(batchdata)
            g_input = engine.g_prepare_batch(num_latents=engine.batch_size)
            g_output = engine.g_inferer(g_input, engine.g_network)
            for _ in range(engine.d_train_steps):
                engine.d_optimizer.zero_grad()
                dloss = engine.d_loss_function(g_output, d_input)
                dloss.backward()
                engine.d_optimizer.step()
        """,
    # corpus2 (sentence-transformers GradCache): `next(iterator)` runs a fresh forward per pass
    "forward-passes-drawn-from-an-iterator": """
        import torch
        def _backward_hook(grad_output, loss_obj, cache):
            with torch.enable_grad():
                for features, grads in zip(loss_obj.features, cache):
                    iterator = loss_obj.embed_minibatch_iter(features, with_grad=True)
                    for grad_mb in grads:
                        reps_mb = next(iterator)
                        surrogate = torch.dot(reps_mb.flatten(), grad_mb.flatten()) * grad_output
                        surrogate.backward()
        """,
    # corpus2 (sentence-transformers): helpers that pad and concatenate given leaves run no
    # module (their backward saves no tensors either)
    "padded-leaves-concatenated-before-score-loop": """
        import torch.nn.functional as F
        def calculate_loss(self, reps, masks_chunks):
            catted = [cat_padded_token_embeddings(r, m) for r, m in zip(reps, masks_chunks)]
            docs, docs_mask = stack_padded_token_embeddings([e for e, _ in catted[1:]])
            for begin in range(0, len(reps), 8):
                scores = self.similarity_fct(catted[0][0][begin:begin + 8], docs, docs_mask)
                loss_mb = F.cross_entropy(scores, self.labels[begin:begin + 8])
                loss_mb.backward()
        """,
    # corpus2 (opacus tests): a random target made with `rand_like` has no graph to share
    "random-target-shared-by-two-models": """
        import torch
        def test_norms(model_normal, model_gc, criterion, x):
            out_normal = model_normal(x)
            target = torch.rand_like(out_normal)
            loss_normal = criterion(out_normal, target)
            loss_normal.backward()
            out_gc = model_gc(x)
            loss_gc = criterion(out_gc, target)
            loss_gc.backward()
        """,
    # corpus2 (flair language-model trainer): the hidden state is detached by a helper method
    "hidden-state-repackaged-by-a-helper": """
        class Trainer:
            def train(self, data, batch_size):
                hidden = self.model.init_hidden(batch_size)
                for x, y in data:
                    self.optimizer.zero_grad()
                    output, hidden = self.model.forward(x, hidden)
                    self.loss_function(output, y).backward()
                    self.optimizer.step()
                    hidden = self._repackage_hidden(hidden)

            @staticmethod
            def _repackage_hidden(h):
                return tuple(v.detach() for v in h)
        """,
}

BUGGY = {
    "loss-module-reads-the-shared-value-on-every-path": ("""
        import torch.nn as nn
        import torch.nn.functional as F
        class PairLoss(nn.Module):
            def forward(self, real, fake, reg, which):
                if which == "gen":
                    return F.mse_loss(fake, real) + 0.1 * reg
                return F.l1_loss(fake, real) + reg
        class Pipeline(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 4)
                self.pair = PairLoss()
            def step(self, x, opt):
                fake = self.net(x)
                reg = fake.abs().mean()
                gen_loss = self.pair(x, fake, reg, "gen")
                gen_loss.backward()
                other = self.pair(x, fake, reg, "l1")
                other.backward()
                opt.step()
        """, [(18, "GT509")]),
    "loss-helper-reads-the-shared-value-on-every-path": ("""
        import torch
        def pair_loss(pred, target, extra, first):
            if first:
                return (pred - target).pow(2).mean() + extra
            return (pred - target).abs().mean()
        def train(model, loader, opt):
            for x, y in loader:
                opt.zero_grad()
                out = model(x)
                extra = out.norm()
                pair_loss(out, y, extra, True).backward()
                pair_loss(out, y, extra, False).backward()
                opt.step()
        """, [(12, "GT509")]),
    # the loop hands the optimizer to a checkpoint saver: saving clears nothing
    "optimizer-handed-to-a-saver-never-cleared": ("""
        import torch
        def train(self, model, loader, optimizer, scheduler):
            for step, batch in enumerate(loader):
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                scheduler.step()
                if step % 1000 == 0:
                    self.save_model(self.output_dir, optimizer, scheduler, model=model)
        """, [(6, "GT501")]),
    # a per-batch step method that never clears: each call adds to the last one's gradients
    "step-method-never-clears": ("""
        import torch
        class Trainer:
            def train_step(self, batch):
                x = batch.to(self.device)
                loss = self.criterion(self.model(x), x)
                loss.backward()
                self.optimizer.step()
                return loss.item()
        """, [(7, "GT501")]),
    # gradient accumulation over micro-batches inside the step method, never cleared
    "accumulating-step-method-never-clears": ("""
        import torch
        class Trainer:
            def train_step(self):
                for _ in range(self.grad_accum_every):
                    with self.accelerator.autocast():
                        loss = self.model(next(self.dl))
                    self.accelerator.backward(loss / self.grad_accum_every)
                self.optim.step()

        class Other:
            def train_step(self):
                self.opt.zero_grad()
                self.model(next(self.dl)).backward()
                self.opt.step()
        """, [(8, "GT501")]),
    # several optimizers stepped in an inner loop over them: not a fresh optimizer per pass
    "optimizers-stepped-in-inner-loop-never-cleared": ("""
        import torch
        def train_model(model, optimizer, batches, loss_function):
            for batch_num, batch in enumerate(batches):
                outputs = model(batch)
                batch_loss = loss_function(outputs, batch.labels)
                batch_loss.backward()
                for opt in optimizer.values():
                    opt.step()
        """, [(7, "GT501")]),
    "running-loss-never-reset": ("""
        def train(self, loader):
            running_loss = 0
            for idx, batch in enumerate(loader):
                loss = self._loss_fn(self._model(**batch), batch["labels"])
                running_loss += loss
                loss.backward()
                self._optimizer.step()
                self._optimizer.zero_grad()
            return running_loss.item() / len(loader)
        """, [(6, "GT505")]),
    "encoder-not-frozen-precomputed": ("""
        prompt_embeds = text_encoder(prompt_ids)[0]
        for step, batch in enumerate(train_dataloader):
            loss = mse(unet(batch["latents"], batch["t"], prompt_embeds), batch["noise"])
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        """, [(2, "GT507")]),
    "throughput-probe-without-clear": ("""
        def measure(forward_fn, loss_fn, optimizer, n):
            for _ in range(n):
                loss_fn(forward_fn()).backward()
                optimizer.step()
        """, [(4, "GT501")]),
    "while-loop-without-clear": ("""
        step = 0
        while step < max_steps:
            loss = model(next(batches)).loss
            loss.backward()
            optimizer.step()
            step += 1
        """, [(5, "GT501")]),
    "lstm-state-tuple-carried": ("""
        h, c = torch.zeros(1, 4, 8), torch.zeros(1, 4, 8)
        for x, y in batches:
            optimizer.zero_grad()
            out, (h, c) = lstm(x, (h, c))
            mse(head(out), y).backward()
            optimizer.step()
        """, [(5, "GT506")]),
    "shared-body-two-backwards": ("""
        for state, ret in rollouts:
            feats = body(state)
            critic_loss = (ret - critic(feats)).pow(2).mean()
            actor_loss = -(actor(feats) * ret).mean()
            opt.zero_grad()
            critic_loss.backward()
            actor_loss.backward()
            opt.step()
        """, [(7, "GT509")]),
    "criterion-attribute-unreduced": ("""
        class Trainer:
            def __init__(self):
                self.criterion = nn.BCEWithLogitsLoss(reduction="none")
            def step(self, x, y):
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
        """, [(8, "GT510")]),
    "model-cleared-between-backward-and-step": ("""
        def train(model, loader, optimizer):
            for x, y in loader:
                loss = F.nll_loss(model(x), y)
                loss.backward()
                model.zero_grad()
                optimizer.step()
        """, [(6, "GT503")]),
    "eval-loop-never-under-no-grad": ("""
        def evaluate(model, data_loader):
            outs = []
            for batch in data_loader:
                outs.append(model(batch))
            return outs
        """, [(5, "GT505")]),
    # twins of the corpus2 look-alikes
    "generator-steps-on-one-generated-batch": ("""
        def _iteration(self, engine, batchdata):
            g_input = engine.g_prepare_batch(num_latents=engine.batch_size)
            g_output = engine.g_inferer(g_input, engine.g_network)
            for _ in range(engine.g_train_steps):
                engine.g_optimizer.zero_grad()
                gloss = engine.g_loss_function(g_output)
                gloss.backward()
                engine.g_optimizer.step()
        """, [(4, "GT507")]),
    "embeddings-computed-once-before-score-loop": ("""
        import torch
        def backward_cached(model, features, grads):
            reps = model.embed(features)
            for grad_mb in grads:
                surrogate = torch.dot(reps.flatten(), grad_mb.flatten())
                surrogate.backward()
        """, [(4, "GT507")]),
    "hidden-state-reshaped-by-a-helper": ("""
        class Trainer:
            def train(self, data, batch_size):
                hidden = self.model.init_hidden(batch_size)
                for x, y in data:
                    self.optimizer.zero_grad()
                    output, hidden = self.model.forward(x, hidden)
                    self.loss_function(output, y).backward()
                    self.optimizer.step()
                    hidden = self._reshape_hidden(hidden)

            @staticmethod
            def _reshape_hidden(h):
                return tuple(v.contiguous() for v in h)
        """, [(7, "GT506")]),
    "shared-features-with-a-random-target": ("""
        import torch
        def step(body, head1, head2, criterion, x):
            feats = body(x)
            target = torch.rand_like(feats)
            loss1 = criterion(head1(feats), target)
            loss1.backward()
            loss2 = criterion(head2(feats), target)
            loss2.backward()
        """, [(7, "GT509")]),
    # twin of the corpus3 look-alike: the built trainer's model runs once before the loop
    "context-from-a-built-trainer-model-before-the-loop": ("""
        def train(args, vocab, batches, prompt):
            trainer = CharacterLanguageModelTrainer.from_new_model(args, vocab)
            context = trainer.model.forward(prompt)
            for data, target in batches:
                trainer.optimizer.zero_grad()
                loss = trainer.criterion(trainer.model.head(data) + context, target)
                loss.backward()
                trainer.optimizer.step()
        """, [(4, "GT507")]),
}


@pytest.mark.parametrize("name", sorted(SILENT))
def test_real_world_shape_is_silent(name: str) -> None:
    assert gt5(SILENT[name]) == []


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_buggy_twin_is_reported(name: str) -> None:
    src, expected = BUGGY[name]
    assert gt5(src) == expected


def _finding(src: str, code: str):
    found = [f for f in check_source(textwrap.dedent(src), "shape.py", select=[code])]
    assert len(found) == 1, found
    return found[0]


def test_accumulator_fix_is_unsafe_when_the_total_is_used_as_a_tensor() -> None:
    f = _finding("""
        import torch
        def train(model, loader, opt):
            total = 0
            for x, y in loader:
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                opt.step()
                total += loss
            torch.distributed.all_reduce(total)
            return total.item()
        """, "GT505")
    assert f.fix is not None and f.fix.safety == "unsafe"
    assert f.fix.edits[0].content == "loss.item()"


def test_accumulator_fix_is_safe_for_a_tensor_total() -> None:
    f = _finding("""
        import torch
        total = torch.zeros(())
        for x, y in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            total += loss
        print(total.item())
        """, "GT505")
    assert f.fix is not None and f.fix.safety == "safe"


def test_rebinding_to_none_points_at_the_use_that_fails() -> None:
    f = _finding("""
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer = optimizer.step()
        """, "GT511")
    assert (f.line, f.related[0].line) == (5, 3)
    assert "'zero_grad'" in f.message


def test_related_locations_lead_from_symptom_to_cause() -> None:
    f = _finding("""
        hidden = model.init_hidden(16)
        for x, y in batches:
            optimizer.zero_grad()
            out, hidden = model(x, hidden)
            criterion(out, y).backward()
            optimizer.step()
        """, "GT506")
    assert f.line == 5
    assert [r.line for r in f.related] == [6, 2]


def test_zero_grad_with_set_to_none_false_is_described_as_zeros() -> None:
    f = _finding("""
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad(set_to_none=False)
        optimizer.step()
        """, "GT503")
    assert "all-zero gradients" in f.message


def test_loss_forward_with_many_sequential_ifs_is_read_in_linear_time() -> None:
    """Every path of a forward is read once per `if`, not once per combination of branches
    (40 sequential `if`s were 2**40 walks before; the value read on every path still counts)."""
    n = 40
    body = "\n".join(f"        if flag{i}:\n            x = x + {i}" for i in range(n))
    ones, zeros = ", ".join("1" for _ in range(n)), ", ".join("0" for _ in range(n))
    src = f"""
import torch.nn as nn
class L(nn.Module):
    def forward(self, x, reg, {", ".join(f"flag{i}" for i in range(n))}):
{body}
        return x.mean() + reg
class P(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 2)
        self.l = L()
    def step(self, x, opt):
        opt.zero_grad()
        out = self.net(x)
        reg = out.abs().mean()
        a = self.l(out, reg, {ones})
        a.backward()
        b = self.l(out, reg, {zeros})
        b.backward()
        opt.step()
"""
    assert gt5(src) == [(2 * n + 16, "GT509")]
