"""The name guesses (the fallback when the code does not say what a value is), in one place."""
from __future__ import annotations

import pytest

from gradtrace.lint.analysis import vocabulary as v


@pytest.mark.parametrize("name", ["y", "labels", "target", "batch", "input_ids", "gt_mask",
                                  "class_labels", "y_true"])
def test_targets(name: str) -> None:
    assert v.is_target_name(name)


@pytest.mark.parametrize("name", ["x", "out", "pred_labels", "logits", "loss", "features"])
def test_not_targets(name: str) -> None:
    assert not v.is_target_name(name)


@pytest.mark.parametrize("name", ["tokenizer", "cfg", "train_config", "logger", "writer"])
def test_objects(name: str) -> None:
    assert v.is_object_name(name)


@pytest.mark.parametrize("name", ["x", "model", "configure"])
def test_not_objects(name: str) -> None:
    assert not v.is_object_name(name)


@pytest.mark.parametrize("name", ["model", "self.encoder", "q_net", "policy", "self.vae"])
def test_models(name: str) -> None:
    assert v.is_model_name(name)


@pytest.mark.parametrize("name", ["modeling", "self.networks_cfg", "loss", "encoded"])
def test_not_models(name: str) -> None:
    assert not v.is_model_name(name)


@pytest.mark.parametrize("name", ["BertModel", "AutoModelForCausalLM", "UNet2DModel"])
def test_pretrained_models(name: str) -> None:
    assert v.is_pretrained_model_class(name)


@pytest.mark.parametrize("name", ["AutoTokenizer", "BertConfig", "AutoProcessor",
                                  "DDPMScheduler", "AutoModelPipeline"])
def test_pretrained_non_models(name: str) -> None:
    assert not v.is_pretrained_model_class(name)


def test_param_like_attributes() -> None:
    assert v.PARAM_LIKE_RE.search("cls_token") and v.PARAM_LIKE_RE.search("pos_embed")
    assert not v.PARAM_LIKE_RE.search("encoder")


def test_loss_callables() -> None:
    assert v.LOSS_CALLABLE_RE.match("criterion") and v.LOSS_CALLABLE_RE.match("focal_loss")
    assert not v.LOSS_CALLABLE_RE.match("model")


def test_rules_use_the_one_vocabulary() -> None:
    from gradtrace.lint.analysis import arg_roles
    from gradtrace.lint.analysis import origins as _trace
    from gradtrace.lint.analysis import params
    from gradtrace.lint.rules.registration import _modules
    assert _trace.TARGET_RE is v.TARGET_RE and arg_roles.is_model_name is v.is_model_name
    assert _modules.PARAM_LIKE_RE is v.PARAM_LIKE_RE
    assert params.PRETRAINED_MODEL_RE is v.PRETRAINED_MODEL_RE


def test_scheduler_names() -> None:
    from gradtrace.lint.analysis.vocabulary import is_scheduler_name
    assert all(map(is_scheduler_name, ("scheduler", "self.lr_scheduler", "sched", "scheds",
                                       "get_linear_schedule_with_warmup", "build_lr_scheduler")))
    assert not any(map(is_scheduler_name, ("DDPMScheduler", "schedule", "noise_sched_fn",
                                           "optimizer", "scheduled_sampling")))


@pytest.mark.parametrize("name", ["netG", "encoder", "text_model", "resnet", "q_net", "student",
                                  "g_encoder", "features"])
def test_callees_spelled_like_modules(name: str) -> None:
    assert v.model_spelling(name)


@pytest.mark.parametrize("name", ["get_model", "build_encoder", "g_prepare_batch",
                                  "cat_padded_token_embeddings", "extract_fbank_features",
                                  "criterion", "loss_fn", "compute"])
def test_callees_not_spelled_like_modules(name: str) -> None:
    assert not v.model_spelling(name)


@pytest.mark.parametrize("name", ["loss", "criterion", "losses", "loss_fn", "focal_loss",
                                  "crit"])
def test_loss_names(name: str) -> None:
    assert v.LOSS_NAME_RE.search(name)


@pytest.mark.parametrize("name", ["glossary", "model", "closs_ratio_x"])
def test_not_loss_names(name: str) -> None:
    assert not v.LOSS_NAME_RE.search(name)


@pytest.mark.parametrize("name", ["predict", "evaluate", "run_validation", "generate_text",
                                  "test_step", "beam_search"])
def test_inference_function_names(name: str) -> None:
    assert v.INFERENCE_NAME_RE.search(name)


@pytest.mark.parametrize("name", ["train_step", "forward", "training_step", "compute_loss"])
def test_not_inference_function_names(name: str) -> None:
    assert not v.INFERENCE_NAME_RE.search(name)


def test_epoch_count_names() -> None:
    from gradtrace.lint.analysis.vocabulary import is_epoch_count_name
    assert all(map(is_epoch_count_name, ("args.epochs", "num_epochs", "EPOCHS", "n_epoch",
                                         "cfg.train.max_epochs", "lr_decay_epoch")))
    assert not any(map(is_epoch_count_name, ("steps_per_epoch", "epoch_iters", "epoch",
                                             "iters_per_epoch", "epochwise", "batches")))
