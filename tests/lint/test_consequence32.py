"""Findings whose mechanism is true on PyTorch but whose consequence does not exist in the
program (docs/triage/consequence32.md): each harmless shape, reduced from the project where it
fired, next to a buggy twin where the consequence exists and the rule still fires. Every
snippet runs on real torch."""
from __future__ import annotations

import pytest

from tests.lint.shape_runner import Shape, judge

torch = pytest.importorskip("torch")

PRELUDE = '''
import time
import warnings
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)
'''

SHAPES: dict[str, tuple[Shape, Shape]] = {
    # PaSST (ex_audioset.py, ex_esc50.py, ex_fsd50k.py, ex_openmic.py `model_speed_test`): a
    # model and an SGD optimizer built in the function, a warm-up loop and a timed loop of
    # forward, `scaler.scale(loss).backward()`, `scaler.step(optimizer)` on `torch.ones`
    # inputs, no zero_grad; only the time is printed. The summed gradients move weights that
    # nothing reads. Twin: the same loop hands the model back: its weights and `.grad` are
    # what the caller gets, the gradient three passes' sum
    "throughput-loop-whose-model-nothing-reads": (Shape("""
        def speed_test(batch_size, test_length):
            net = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
            net = net.to("cpu")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.001)
            x = torch.ones([batch_size, 8])
            target = torch.ones([batch_size, 4])
            t1 = time.perf_counter()
            for i in range(test_length):
                y_hat = net(x)
                loss = F.binary_cross_entropy_with_logits(y_hat, target, reduction="none").mean()
                loss.backward()
                optimizer.step()
            t2 = time.perf_counter()
            print("average speed:", test_length * batch_size / (t2 - t1), "specs/second")
            return t2 - t1
        elapsed = speed_test(2, 3)
        """, "GT501", holds="elapsed > 0"), Shape("""
        def train(batch_size, steps):
            net = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
            net = net.to("cpu")
            optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
            x = torch.ones([batch_size, 8])
            target = torch.ones([batch_size, 4])
            for i in range(steps):
                y_hat = net(x)
                loss = F.binary_cross_entropy_with_logits(y_hat, target, reduction="none").mean()
                loss.backward()
                optimizer.step()
            return net
        net = train(2, 3)
        once = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 4))
        once.load_state_dict(net.state_dict())
        F.binary_cross_entropy_with_logits(once(torch.ones(2, 8)), torch.ones(2, 4)).backward()
        """, "GT501", line=10,
        holds="torch.allclose(net[0].weight.grad, 3 * once[0].weight.grad)")),
    # CrossGNN's vendored Pyraformer (pyraformer/graph_attention.py `test_NSA`, `test_GSA`,
    # `test_PSA`): a layer and Adam built in the function, `optimizer.zero_grad()` once, then
    # 1,000 passes of forward, backward, step on `torch.ones`/`torch.zeros`, reading the
    # device's memory each pass; only the time and the memory are printed. Twin: the loop
    # keeps each pass's loss and hands the list back: the losses the caller reads come from
    # steps on summed gradients
    "memory-benchmark-stepping-a-layer-nothing-reads": (Shape("""
        def test_attention(input_len, d_model, repeat_times):
            layer = nn.MultiheadAttention(d_model, 2, batch_first=True).to("cpu")
            optimizer = torch.optim.Adam(layer.parameters(), 1e-4)
            optimizer.zero_grad()
            hidden_state = torch.ones(4, input_len, d_model, dtype=torch.float32)
            fake_gt = torch.zeros(4, input_len, d_model)
            used_memory = 0
            start_time = time.time()
            for i in range(repeat_times):
                result, _ = layer(hidden_state, hidden_state, hidden_state)
                used_memory += torch.cuda.memory_allocated() / 1024 ** 3
                loss = ((fake_gt - result) ** 2).mean()
                loss.backward()
                optimizer.step()
            elapsed = (time.time() - start_time) / repeat_times
            print("used average time: {} s".format(round(elapsed, 4)))
            print("used average memory: {} GB".format(round(used_memory / repeat_times, 4)))
        test_attention(5, 8, 3)
        """, "GT502"), Shape("""
        def fit_attention(input_len, d_model, repeat_times):
            layer = nn.MultiheadAttention(d_model, 2, batch_first=True).to("cpu")
            optimizer = torch.optim.SGD(layer.parameters(), 0.0)
            optimizer.zero_grad()
            hidden_state = torch.ones(4, input_len, d_model, dtype=torch.float32)
            fake_gt = torch.zeros(4, input_len, d_model)
            losses = []
            for i in range(repeat_times):
                result, _ = layer(hidden_state, hidden_state, hidden_state)
                loss = ((fake_gt - result) ** 2).mean()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            return layer, losses
        layer, losses = fit_attention(5, 8, 3)
        grad = layer.out_proj.weight.grad.clone()
        layer.zero_grad()
        out, _ = layer(torch.ones(4, 5, 8), torch.ones(4, 5, 8), torch.ones(4, 5, 8))
        (out ** 2).mean().backward()
        """, "GT502", line=4,
        holds="torch.allclose(grad, 3 * layer.out_proj.weight.grad, atol=1e-6)")),
    # cwn (mp/test_models.py, mp/test_molec_models.py): `data_list =
    # get_testing_complex_list()` (data/dummy_complexes.py: `return [get_fullstop_complex(),
    # get_pyramid_complex(), ...]`, 23 hand-written complexes), `DataLoader(data_list,
    # batch_size=bs)` (the project's subclass of torch's), the model's outputs appended with
    # grad on, then `torch.cat` and `assert torch.allclose(...)`: the graphs kept are those of
    # at most 23 tiny batches, never more. Twin: the same loop in an evaluation function over
    # the dataset its caller gives: one graph per batch of a dataset of any size (the
    # LG-FedAvg evaluation of unseen28)
    "outputs-kept-over-a-hand-written-list-of-samples": (Shape("""
        class Loader(torch.utils.data.DataLoader):
            pass
        def dummy_samples():
            return [torch.ones(3), torch.zeros(3), torch.full((3,), 2.0), torch.ones(3) / 3]
        def check_batching(batch_size):
            data_list = dummy_samples()
            model = nn.Linear(3, 2)
            model.eval()
            data_loader = Loader(data_list, batch_size=batch_size)
            batched_preds = []
            for batch in data_loader:
                batched_pred = model.forward(batch)
                batched_preds.append(batched_pred)
            batched_preds = torch.cat(batched_preds, dim=0)
            preds = torch.cat([model(x.unsqueeze(0)) for x in data_list], dim=0)
            assert torch.allclose(preds, batched_preds, atol=1e-6)
            return batched_preds
        out = check_batching(2)
        """, "GT505", holds="out.shape == (4, 2)"), Shape("""
        def predict(model, dataset, batch_size):
            model.eval()
            data_loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size)
            batched_preds = []
            for batch in data_loader:
                batched_pred = model.forward(batch)
                batched_preds.append(batched_pred)
            return torch.cat(batched_preds, dim=0)
        out = predict(nn.Linear(3, 2), [torch.randn(3) for _ in range(6)], 2)
        """, "GT505", line=7, holds="out.grad_fn is not None")),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_harmless_shape_is_silent_and_runs(name: str) -> None:
    judge(PRELUDE, SHAPES[name][0])


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_buggy_twin_is_reported_and_its_consequence_holds(name: str) -> None:
    judge(PRELUDE, SHAPES[name][1])
