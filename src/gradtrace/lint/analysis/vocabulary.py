"""Name guesses: the last resort when the code does not say what a value is.

Every rule decides what a name holds from the code first (imports, constructors, assignments,
``self`` attributes, the returns of the file's own functions: :mod:`gradtrace.lint.analysis`).
Only when nothing in the file says it, the identifier's words are read, and only through the
patterns below, gathered in one place and tested on their own (tests/lint/test_vocabulary.py).
Comments and strings never reach them.
"""
from __future__ import annotations

import re

# -- what a function argument probably holds ---------------------------------------------------
# targets and other data that never carry the model's graph
TARGET_RE = re.compile(r"^(y|ys|y_true|gt|gts|labels?|targets?|tgt|batch|batch_idx|masks?|"
                       r"batch_nb|(gt|target|true|label)_masks?|.*_ids|"
                       r"(?!(pred|predicted|predictions?|outputs?|out|logits?|scores?|probs?)_)"
                       r".*_(labels?|targets?|gt|true))$")  # `pred_labels` are predictions
# objects, never tensors on the graph (their methods return data)
OBJECT_RE = re.compile(r"^(.*_)?(tokenizer|processor|config|cfg|opts|options|hparams|"
                       r"logger|writer)$")
# a model's input data
INPUT_RE = re.compile(r"^(x|xs|inputs?|images?|imgs?|obs|observations?|states?|"
                      r"batch_data|data|features|x_(in|batch|train))$")
# what a loop iterates over when it walks data, not tensors on the graph
DATA_ITER_RE = re.compile(r"loader|dataset|batches|data_iter|dl\b|range\(|epoch")

# -- what a callee probably is -----------------------------------------------------------------
# a call's keyword argument that sets a dropout probability (`nn.LSTM(..., dropout=0.2)`,
# `MLP(dims, dropout_rate=0.1)`): given a value, the callee builds a dropout layer (a prefixed
# one, `lora_dropout=p` handed on to a base, may build none: p defaults to 0)
DROPOUT_ARG_RE = re.compile(r"^dropout\w*$")
# a loss function object (`criterion`, `loss_fn`)
LOSS_CALLABLE_RE = re.compile(r"^(criterion\w*|\w*_criterion|\w*loss(_fn|_func|_fct|_function)?)$",
                              re.IGNORECASE)

# -- classes of other files ----------------------------------------------------------------------
# `X.from_pretrained(...)` builds a model when X is named like one, not like a tokenizer
PRETRAINED_MODEL_RE = re.compile(r"Model|For[A-Z]|Transformer|UNet|VAE|Autoencoder")
NOT_MODEL_RE = re.compile(r"Tokenizer|Config|Processor|Extractor|Scheduler|Pipeline")
# model factories of other libraries (a call of these builds a module)
MODEL_FACTORIES = ("torchvision.models.", "timm.create_model")

# -- attributes ----------------------------------------------------------------------------------
# attribute names that are usually Parameters, not submodules (timm cls_token, pos_embed...)
PARAM_LIKE_RE = re.compile(r"weight|bias|token|embed|pos|param|scale|gamma|alpha|mask|logit",
                           re.IGNORECASE)


def is_target_name(name: str) -> bool:
    """``y``, ``labels``, ``batch``, ``input_ids``: data, never the model's graph."""
    return bool(TARGET_RE.match(name))


def is_object_name(name: str) -> bool:
    """``tokenizer``, ``cfg``, ``logger``: objects, not tensors."""
    return bool(OBJECT_RE.match(name))


def is_model_name(name: str) -> bool:
    """``model``, ``self.encoder``, ``q_net``, ``self.classifier``: named like a model (the
    last dotted part, by :func:`model_spelling`: one spelling for every tracer)."""
    return model_spelling(name.rpartition(".")[2])


def is_pretrained_model_class(name: str) -> bool:
    """``BertModel``, ``AutoModelForCausalLM``, not ``AutoTokenizer``."""
    return bool(PRETRAINED_MODEL_RE.search(name)) and not NOT_MODEL_RE.search(name)


# an optimizer held by an attribute set from an argument (`self.optimizer = optimizer`)
OPTIMIZER_NAME_RE = re.compile(r"(^|_)(optim|optimi[sz]er|opt)(_\w+)?$|^opt[A-Z_]",
                               re.IGNORECASE)


def is_optimizer_name(name: str) -> bool:
    """``optimizer``, ``self.opt``, ``optim_g``, ``g_optimizer``: named like an optimizer (last
    dotted part)."""
    return bool(OPTIMIZER_NAME_RE.search(name.rpartition(".")[2]))


# a learning-rate scheduler, by its own name or the function that built it (`lr_scheduler`,
# `self.sched`, `get_cosine_schedule_with_warmup`), when no constructor in the file says so
SCHEDULER_RE = re.compile(r"(^|_)(lr_)?(sched|scheduler)s?$|^(get|build|create|make)_\w*schedul",
                          re.IGNORECASE)


def is_scheduler_name(name: str) -> bool:
    """``scheduler``, ``lr_scheduler``, ``get_linear_schedule_with_warmup``; not
    ``DDPMScheduler`` (a diffusion noise scheduler) nor ``schedule``."""
    return bool(SCHEDULER_RE.search(name.rpartition(".")[2]))


# a count of epochs (`args.epochs`, `num_epochs`, `lr_decay_epoch`, `EPOCHS`), not of
# iterations (`steps_per_epoch`, `iters_per_epoch`, `epoch_iters`)
EPOCH_COUNT_RE = re.compile(r"(^|_)epochs?($|_)", re.IGNORECASE)
ITERATION_WORD_RE = re.compile(r"iter|step|batch|update|sample|len", re.IGNORECASE)


def is_epoch_count_name(name: str) -> bool:
    """``args.epochs``, ``num_epochs``, ``decay_epoch``: a number of epochs (last dotted
    part); not ``steps_per_epoch`` nor ``epoch_iters``."""
    last = name.rpartition(".")[2]
    return bool(EPOCH_COUNT_RE.search(last)) and not ITERATION_WORD_RE.search(last) \
        and last.lower() != "epoch"  # the loop's counter, not a count


# -- losses and inference functions ----------------------------------------------------------------
# a loss callee or a loss function (`criterion`, `my_loss`, `loss_fn`)
# the LightningModule method whose returned loss Lightning backpropagates
STEP_METHOD = "training_step"
# the LightningModule methods Lightning runs with grad off (its evaluation loops run under
# `torch.no_grad()` / `torch.inference_mode()`)
EVAL_STEP_METHODS = frozenset({"validation_step", "test_step", "predict_step"})
LOSS_NAME_RE = re.compile(r"(loss|criterion|crit)s?$|^(loss|criterion)", re.IGNORECASE)
# (`rsample` is no inference: torch.distributions' reparameterised sample, the one a gradient
# flows through; `sample`, `resample`, `sampler` stay)
INFERENCE_NAME_RE = re.compile(
    r"(predict|evaluat|validat|generat|(?<!_r)(?<!^r)sampl|infer|(^|_)test|(^|_)eval|inference|decode|"
    r"visuali|score|metric|beam|search)", re.IGNORECASE)

# keyword switches by which a context manager of another file turns grad off, with the value
# that does it (bet's `with utils.eval_mode(model, no_grad=True):`, a class whose `__enter__`
# enters `torch.no_grad()`): a word, so grad *may* be off there (silence, never a report)
GRAD_OFF_SWITCHES = {"no_grad": True, "inference_mode": True, "enable_grad": False,
                     "grad_enabled": False}

# roots of other array frameworks: what their functions, or methods of objects they made
# (`tf.Session().run(...)`), hand back is never a torch tensor with a graph, and a class
# deriving from their `Module` (`mlx.nn.Module`, whose `parameters()` walks lists and dicts)
# is no `nn.Module`
OTHER_FRAMEWORKS = frozenset({"tensorflow", "keras", "jax", "flax", "paddle", "mindspore",
                              "mxnet", "mlx", "equinox", "haiku", "tinygrad"})

# roots of image and plotting libraries: their functions, and methods of what they made, hand
# back their own objects or NumPy arrays (`PIL.Image.fromarray(a)`, `cv2.resize(a, s)`), never
# a torch tensor with a graph: a tensor that requires grad makes them raise
IMAGE_LIBRARIES = frozenset({"PIL", "cv2", "imageio", "skimage", "matplotlib"})

# roots of NumPy-side libraries whose functions compute numbers from arrays (scikit-learn's
# metrics, SciPy's statistics): a function returning what one of them computes is a metric
METRIC_LIBRARIES = frozenset({"sklearn", "scipy"})


# -- modules, by the words of a callee (NOTE [graph-carrying bindings]) ----------------------------
MODEL_WORDS = frozenset({
    "model", "models", "net", "network", "encoder", "decoder", "generator", "discriminator",
    "critic", "g", "d", "rnn", "lstm", "gru", "cell", "backbone", "head", "classifier", "policy",
    "actor", "unet", "vae", "transformer", "embed", "embedding", "embeddings", "proj",
    "projection", "fc", "linear", "conv", "mlp", "layer", "layers", "module", "disc", "gen",
    "stem", "neck", "tower", "predictor", "denoiser", "autoencoder", "seq2seq", "trunk",
    "torso", "student", "bert", "gpt", "llm",
})
# words that name a module only when the whole name is made of such words (`self.features`,
# `feature_extractor`, `body`), not inside a function name (`extract_fbank_features`)
WEAK_MODEL_WORDS = frozenset({"features", "feature", "extractor", "body", "q", "value", "agent",
                              "base", "shared", "pi", "v"})
# methods of a module that run (part of) its forward pass
FORWARD_METHODS = frozenset({"forward", "encode", "decode", "encode_image", "encode_text",
                             "forward_features", "forward_head", "extract_features", "embed",
                             "get_image_features", "get_text_features"})
# verbs of functions that build or fetch a module object rather than run it
FACTORY_WORDS = frozenset({"get", "load", "build", "create", "make", "init", "unwrap", "wrap",
                           "prepare", "setup", "copy", "deepcopy", "instantiate", "compile",
                           "new", "clone", "freeze", "register", "save", "set", "is", "has",
                           "from"})  # `from_pretrained`, `Trainer.from_new_model(args)`
# verbs of helper functions that reshape or combine the tensors they are given
# (`cat_padded_token_embeddings(reps)`, `stack_features(xs)`): they run no module
SHAPE_WORDS = frozenset({"cat", "concat", "concatenate", "stack", "pad", "split", "chunk",
                         "gather", "scatter", "merge", "collate", "pack", "unpack", "flatten",
                         "reshape", "crop", "resize", "select", "slice", "shuffle", "sort"})
# short role prefixes of GAN / actor-critic code (`g_prepare_batch`, `d_get_input`)
ROLE_PREFIXES = frozenset({"g", "d", "gen", "disc", "q", "pi", "v"})
WORD_RE = re.compile(r"[A-Z]?[a-z]+\d*|[A-Z]+(?![a-z])\d*|\d+")
# a class (its call builds an object): `ResNet`, `MTSimpleMLP`, `GPWorldModel`; not `G`, `D_net`
CLASS_RE = re.compile(r"[A-Z][a-z]|[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")


def _dimension_suffix(name: str, m: re.Match[str]) -> bool:
    """One letter right after a digit is a dimension suffix (``j2d``, ``pose_3d``), not a word:
    the ``d`` of ``j2d_processing`` is not a discriminator's."""
    i = m.start()
    return len(m.group()) == 1 and i > 0 and name[i - 1].isdigit()


def model_spelling(name: str) -> bool:
    """Whether a callee's last name part is spelled like a module (``netG``, ``self.encoder``,
    ``resnet``, ``text_model``); NOTE [graph-carrying bindings]."""
    words = [m.group().lower().rstrip("0123456789") for m in WORD_RE.finditer(name)
             if not _dimension_suffix(name, m)]
    if not words or words[-1] in ("loss", "losses", "criterion", "fn", "func"):
        return False
    verb = words[1] if len(words) > 1 and words[0] in ROLE_PREFIXES else words[0]
    if verb in FACTORY_WORDS or (verb in SHAPE_WORDS and len(words) > 1):
        return False  # `get_model`, `g_prepare_batch`, `cat_padded_token_embeddings`
    if any(w in MODEL_WORDS or (w.endswith("net") and len(w) <= 12) for w in words):
        return True
    return all(w in WEAK_MODEL_WORDS for w in words)

# Context-manager methods of a training engine that run their body (NOTE [accumulation context])
# as one micro-step of a gradient-accumulation window, the wrapped optimizer's `zero_grad()` and
# `step()` acting only on the window's last micro-step (accelerate's `Accelerator.accumulate`)
ACCUMULATION_CONTEXTS = frozenset({"accumulate"})

# Classes whose instances' `backward(loss)` differentiates the argument (NOTE [backward callers]):
# a name the file binds only to one of these is such an owner whatever it is called (`acc =
# Accelerator()` then `acc.backward(loss)`), checked with accelerate 1.16 and lightning installed
BACKWARD_OWNER_CLASSES = frozenset({
    "accelerate.Accelerator", "accelerate.accelerator.Accelerator",
    "lightning.Fabric", "lightning.fabric.Fabric", "lightning_fabric.Fabric",
    "lightning.fabric.fabric.Fabric"})
