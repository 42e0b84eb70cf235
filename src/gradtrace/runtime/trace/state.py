"""What one tracing session has seen: cuts, grad-mode switches, in-place ops, backward calls.

All tensors are held through :mod:`weakref` (validated on lookup, pruned when the tables grow);
autograd nodes are annotated through ``grad_fn.metadata``, which dies with the graph.
"""
from __future__ import annotations

import sys
import weakref
from collections import OrderedDict, deque
from typing import Any, Callable

import torch

from gradtrace.findings import Finding
from gradtrace.runtime.frames import Site, site_of
from gradtrace.runtime.trace.step_caller import step_caller
from gradtrace.runtime.loss_listeners import LOSS_LISTENERS
from gradtrace.runtime.trace.layer_sites import layer_here
from gradtrace.runtime.trace.leaves import upstream_leaves
from gradtrace.runtime.trace.accum_caller import caller_of_argument, returned_backpropagated
from gradtrace.runtime.trace.kept_losses import adds_chained
from gradtrace.runtime.trace.unused_total import note_total
from gradtrace.runtime.trace.records import Counter, Cut, Event, RawSite, created_site, node_name
from gradtrace.runtime.trace.root_leaf import mark_root_cut
from gradtrace.runtime.trace.reached_cuts import watch_after_backward
from gradtrace.runtime.trace.shared_block import more_sources
from gradtrace.runtime.trace.detach_wrapper import wrapper_caller, wrapper_site
from gradtrace.runtime.trace.view_write import stamp_view_write
from gradtrace.runtime.trace.state_grad import GradEvents

Tensor = torch.Tensor
# (site, op, grad_fn names before/after, shape, version before, line that made the tensor,
# where the torch layer that wrote was built: NOTE [layer built here])
InplaceRecord = tuple[Site, str, tuple[str, ...], tuple[int, ...], int, "Site | None",
                      "Site | None"]
_PRUNE_AT = 4096


class TraceState(GradEvents):
    """Mutable record of one session; the ProvenanceMode and the global hooks write into it."""

    def __init__(self, diagnose: Callable[..., list[Finding]] | None = None) -> None:
        # turns a failing torch call into findings (the Tracer passes
        # :func:`gradtrace.runtime.trace.diagnose.diagnose_failure`; state never imports it)
        self.diagnose = diagnose
        self.cuts: dict[int, tuple[weakref.ref[Tensor], Cut]] = {}
        self.cut_upstream: dict[Cut, frozenset[int]] = {}
        self._cut_cache: dict[tuple[Any, ...], tuple[Any, Cut]] = {}
        self._site_cache: dict[tuple[int, Any], tuple[Any, Site]] = {}
        self._upstream_seen: set[int] = set()
        self.cut_sources: dict[Cut, list[Any]] = {}  # NOTE [one no_grad site, two models]
        self.sources_done: set[int] = set()
        # id -> weak reference of each leaf named in cut_upstream: a leaf that dies leaves the
        # sets, so that a later tensor reusing its id is not taken for it
        self._leaf_refs: dict[int, weakref.ref[Tensor]] = {}
        # cuts taken of a leaf itself (`p.detach().clone()`): NOTE [snapshot cuts]
        self.leaf_cuts: set[Cut] = set()
        self.root_cuts: set[Cut] = set()  # NOTE [backward of a leaf]
        self.meet_watch = False  # NOTE [cut that reaches the loss]: node id -> cut, reached,
        self.met_nodes: dict[int, Cut] = {}  # the cuts made while watching, graphs walked
        self.reached: set[Cut] = set()
        self.watched: set[Cut] = set()
        self.walks = 0
        self.cut_feeds: dict[Cut, tuple[set[int], set[int]]] = {}  # detached_feed.py
        self.random_fills: dict[int, Any] = {}  # NOTE [random weight kept as a buffer]
        self.score_weights: dict[Site, int] = {}  # NOTE [reward weight not detached]
        self.paired_means: dict[Site, tuple[int, str]] = {}  # NOTE [reduced before it was paired]
        self.forced_walks = 0  # (and the walks it made from a number's tensor)
        self.zero_ops: list[tuple[Site, str]] = []  # NOTE [zero-derivative ops]
        self._prune_at = _PRUNE_AT
        self.items: OrderedDict[int, tuple[Any, Cut, Any]] = OrderedDict()
        # .item()/float() of tensors that require grad since the last backward() (and before)
        self.step_items: list[Cut] = []
        self.items_before: list[Cut] = []
        self.grad_off: Site | None = None
        self.inference_blocks: dict[Site, None] = {}  # inference_mode with/decorator lines seen
        self.grad_off_how = ""
        self.events: dict[tuple[str, Site, str], Counter] = {}
        self.inplace: deque[InplaceRecord] = \
            deque(maxlen=512)
        # no-grad in-place writes: see NOTE [write into a tensor without grad]
        self.plain_inplace: deque[InplaceRecord] = deque(maxlen=64)
        self.backward_count = 0
        self.cuts_by_last_backward = 0  # NOTE [cut after the last backward] in silent.py
        self.backward_sites: list[Site] = []
        self.kept_roots: list[tuple[Any, Site]] = []  # the first 8 losses backpropagated
        self.returned_at: dict[Site, Site | None] = {}  # NOTE [running total of a returned loss]
        self.last_backward_seq = -1
        self.unrolled: set[tuple[str, Site, str]] = set()  # running totals of an unroll
        self.accumulating_seq = -1  # the last backward() into leaves (autograd.grad not counted)
        self.in_backward = False
        self.freeze: dict[int, tuple[weakref.ref[Tensor], Site]] = {}
        self.unfreeze: dict[int, tuple[weakref.ref[Tensor], Site]] = {}  # Parameters only
        self.thaws: dict[Any, Any] = {}  # NOTE [unfrozen after the last step]
        self.thaw_held: Any = None
        self.thaw_names: dict[int, Any] = {}
        # plain leaf tensors made trainable, the latest 32: NOTE [replaced under the optimizer]
        self.made_leaves: dict[int, tuple[weakref.ref[Tensor], Site]] = {}
        self.leaf_births: dict[int, tuple[Any, ...]] = {}  # + version then, factory or not
        self.grad_none: dict[int, Site | None] = {}
        # leaves whose .grad user code read as None: NOTE [read as None by the program]
        self.none_reads: dict[int, tuple[weakref.ref[Tensor], int]] = {}
        self.steps_ended = 0  # optimizer steps whose post-hook ran
        self._grad_none_seq = -1
        self._grad_none_site: Site | None = None
        self.zero_seen = False
        # a parameter (or gradient) id of each optimizer -> that parameter's id, and where the
        # parameter's gradient was last cleared: NOTE [clear on some passes only]
        self.clear_watch: dict[int, int] = {}
        self.clear_sites: dict[int, Site | None] = {}
        self.clear_ticks: dict[int, int] = {}  # backward() calls then: NOTE [clear of a part]
        self.fresh_grads = False  # a backward() ran since the last optimizer step
        self.wiped_at: Site | None = None  # gradients cleared after that backward(), here
        self.wiped_ids: set[int] = set()  # ids of the parameters/gradients cleared there
        # gradients cleared before any step used them, seen when the next backward() starts:
        # (clearing line, that backward's line, backward() calls since the last step, ids);
        # and the backward() lines whose gradients a step did use (loop_order.py)
        self.discards: list[tuple[Any, ...]] = []  # (zero line, backward line, count, ids, marks)
        self.consumed_sites: dict[Site, int] = {}  # line -> most backward() calls one step used
        self.fresh_count = 0  # backward() calls since the last optimizer step
        self.order: Any = None  # loop_order.Order, once an optimizer has stepped
        self.after_step: Site | None = None
        self.recent_steps: list[Any] = []  # NOTE [first step that broke the graph]
        self.step_raw: Any = None  # the cheap form of the last step's own line (not its first)
        self.step_caller: Site | None = None  # NOTE [step in a helper handed the optimizer]
        self.grad_scaler = False  # a GradScaler unscaled gradients (it may skip steps)
        self.clip_at: Site | None = None  # gradients clipped here since the last backward()
        self.clipped: Any = None  # which (NOTE [clip of parameters no step uses])
        # no_grad cut of a live tensor -> the statement in the no_grad block that made it
        self.block_stmt: dict[Cut, Site | None] = {}  # (NOTE [dead loss term])
        self.dead_pending: list[Cut] = []  # sums holding a dead term, since the last backward
        self.data_writes: list[tuple[Any, ...]] = []  # NOTE [values swapped under a saved graph]
        self.swap_walks, self.swap_found = 0, []  # type: ignore[var-annotated]
        self.data_aliases: dict[int, tuple[Any, Any]] = {}  # `p.data` results, for their writes
        self.detached_terms: OrderedDict[int, Any] = OrderedDict()  # (dead_terms.py)
        self.numpy_cut: Any = None  # NOTE [loss term computed in NumPy]
        self.in_step = False
        self.closure_steps = False  # an optimizer stepped with a closure (LBFGS)
        self.closure_watch: Any = None  # NOTE [closure evaluations summed] (closure_sum.py)
        self.closure_sum: Any = None
        self.step_seq = -1
        self.crash_findings: list[Finding] = []
        self.where_checks: dict[RawSite, int] = {}  # torch.where line -> branches checked
        self.softmax_ones: dict[Any, list[Any]] = {}  # NOTE [softmax over a singleton dim]
        self.nan_hunt_next = False  # hunt the next backward for a NaN's origin (nan_origin.py)
        self.backward_hunted = False  # the session's first backward() was hunted (nan_origin.py)
        self.nan_origin: tuple[Site, str, str] | None = None  # line, op, leaf: a NaN's birth
        self.loss_nan: Any = None  # NOTE [NaN loss hunted]: None, False (hunted), (line, op)
        self.totals: dict[Site, Any] | None = None  # NOTE [total never backpropagated]
        self.step_hunt: Any = None  # NOTE [NaN made by a step] (step_nan.StepHunt)
        self.blowup: tuple[Site, str, str, float, float] | None = None  # NOTE [gradient blown up]
        # NOTE [forward NaN origin] (fwd_nan.py): hunting in the first forward, infs made
        # from finite inputs, the first NaN (line named, op, its own line), the loss non-finite
        self.fwd_hunt = True
        self.fwd_inf: dict[int, Any] = {}
        self.fwd_nan: tuple[Site | None, str, Site | None] | None = None
        self.loss_nonfinite = False
        self.fwd_nan_nograd = False  # NOTE [NaN made under no_grad]
        self.hunt: Any = None  # the NaN hunt of the backward running now (diagnose_crash)
        self.hooks_data: Any = None  # the HookState of the same session (set by the Tracer)
        self.loss_checks: dict[tuple[int, int], int] = {}  # NOTE [loss input]: per loss line
        self.loss_findings: dict[tuple[Site, str], Finding] = {}
        # sigmoid line -> most ops using one of its outputs in a loss graph; (sigmoid line,
        # loss op) -> the loss line it was fed to (NOTE [sigmoid kept as probabilities])
        self.sigmoid_uses: dict[Site, int] = {}
        self.bce_on_sigmoid: dict[tuple[Site, str], Site] = {}
        # NOTE [custom Function returning None] (graph_scan.py): nodes hooked; (class, backward
        # code) -> [tensor inputs it returned None for, grad-off op line, autograd.grad line
        # that returned None]; the watch of the custom backward running now
        self.fn_watch: dict[int, None] = {}
        self.fn_none: dict[tuple[Any, Any], list[Any]] = {}
        self.fn_active: list[Any] = []
        self.loose: dict[int, list[Any]] = {}  # NOTE [hand-made leaf left out of the optimizer]
        # NOTE [soft target not detached] (soft_target.py): softmax line -> (ids of the leaves
        # only the target reaches, the product's line, the backward() line)
        self.soft_targets: dict[Site, tuple[set[int], Site | None, Site | None]] = {}
        # NOTE [evaluation gradients applied] (windows.py): eval-mode backward() calls in the
        # window since the last step, the module calls in eval mode seen, the last such line
        self.window_evals = 0
        self.evals_seen = (0, 0)
        self.mean_roots: dict[Site, list[Any]] = {}  # NOTE [accumulated means not scaled]
        self.ema_reads: dict[int, list[Any]] = {}  # NOTE [EMA between steps]
        self.nograd_writes: dict[int, Site] = {}  # NOTE [average that skips the statistics]
        self.eval_backward: Site | None = None
        self.eval_filled: Any = None  # (its line, the gradients' marks at its start)
        self.eval_checks = 0

    # -- sites and cuts ----------------------------------------------------------------------
    def site(self, raw: RawSite) -> Site:
        # keyed by id(code): hashing a code object hashes its constants, nested functions
        # included (tens of us for a script's module-level code); the code is kept to check it
        key = (id(raw[0]), raw[1:])  # raw: (code, line[, lasti])
        hit = self._site_cache.get(key)
        if hit is None or hit[0] is not raw[0]:
            hit = self._site_cache[key] = (raw[0], site_of(raw))  # type: ignore[assignment]
        return hit[1]  # type: ignore[return-value]

    def make_cut(self, raw: RawSite, op: str, reason: str, origin: Cut | None = None,
                 block: Site | None = None, library: bool = False) -> Cut:
        """The (cached) cut record; ``block`` is the inference_mode ``with``/decorator line
        around an ``inference`` cut; ``library``: made inside library code the user called."""
        # one record per no_grad block too: one op run under two blocks has two causes
        grad_off = self.grad_off if reason == "no_grad" else block
        inner = None
        if reason in ("detach", "rewrap", "copy") and (up := wrapper_caller(raw, reason)):
            inner, raw = wrapper_site(self.site(raw), raw[0]), up  # NOTE [grad-free wrapper]
        key = (id(raw[0]), raw[1:], op, reason, origin, grad_off, library)
        hit = self._cut_cache.get(key)
        if hit is None or hit[0] is not raw[0]:
            switch = None
            if reason == "no_grad":  # NOTE [grad off on the stack]: once per new cut
                from gradtrace.runtime.trace.offstack import off_switch

                switch = off_switch(sys._getframe(1))
            caller = None
            if block is not None and block.source().startswith("@"):
                from gradtrace.runtime.trace.locate import decorated_caller

                caller = decorated_caller(sys._getframe(1), block)
            hit = self._cut_cache[key] = (raw[0], Cut(self.site(raw), op, reason, grad_off,
                                                      origin, library, switch, inner, caller))
            if block is not None:
                self.inference_blocks[block] = None
        return hit[1]

    def add_cut(self, out: Tensor, cut: Cut, src: Tensor | None) -> None:
        if len(self.cuts) >= self._prune_at:
            self._prune()
        self.cuts[id(out)] = (weakref.ref(out), cut)
        if src is not None and id(cut) not in self._upstream_seen:  # (cuts live in _cut_cache)
            self._upstream_seen.add(id(cut))
            if src.grad_fn is None and cut.reason == "detach":
                self.leaf_cuts.add(cut)
            if cut not in self.cut_upstream:
                self.cut_upstream[cut] = upstream_leaves(src, self._track_leaf)
            if self.backward_count < 3:
                self.meet_watch = True  # NOTE [cut that reaches the loss]
                self.watched.add(cut)
        elif src is not None and cut.reason == "no_grad" and cut.grad_off is not None \
                and id(cut) not in self.sources_done:  # a user's block, not a library's
            more_sources(self, cut, src)  # NOTE [one no_grad site, two models]

    def widen_upstream(self, cut: Cut, parts: Any) -> None:
        """Once per cut: add the leaves of every tensor in ``parts`` (the elements of a list
        rebuilt into a new tensor) to what ``cut`` cut off."""
        if ("widened", id(cut)) in self._upstream_seen:
            return
        self._upstream_seen.add(("widened", id(cut)))  # type: ignore[arg-type]
        leaves = [upstream_leaves(b, self._track_leaf) for b in parts
                  if isinstance(b, Tensor) and b.requires_grad]
        self.cut_upstream[cut] = self.cut_upstream.get(cut, frozenset()).union(*leaves)

    def _track_leaf(self, t: Tensor) -> None:
        key = id(t)
        hit = self._leaf_refs.get(key)
        if hit is not None and hit() is t:
            return
        me = weakref.ref(self)

        def died(_: Any, key: int = key) -> None:
            state = me()
            if state is not None:
                state._leaf_died(key)
        try:
            self._leaf_refs[key] = weakref.ref(t, died)
        except TypeError:  # pragma: no cover - every torch.Tensor takes weak references
            pass

    def _leaf_died(self, key: int) -> None:
        """A leaf named in ``cut_upstream`` died: its id may now be reused by another tensor."""
        self._leaf_refs.pop(key, None)
        for cut, ids in list(self.cut_upstream.items()):
            if key in ids:
                self.cut_upstream[cut] = ids - {key}

    def trainable_cuts(self) -> list[Cut]:
        """``.data``/``.detach()`` cuts with a leaf upstream that requires grad now: a
        trainable branch cut off the loss (``.data`` ones first)."""
        refs = self._leaf_refs
        out = [c for c, ids in self.cut_upstream.items() if c.reason in ("data", "detach")
               and any(getattr(refs[i](), "requires_grad", False) for i in ids if i in refs)]
        return sorted(out, key=lambda c: c.reason != "data")

    def _prune(self) -> None:
        self.cuts = {k: v for k, v in self.cuts.items() if v[0]() is not None}
        self._prune_at = max(_PRUNE_AT, 2 * len(self.cuts))

    def cut_of(self, t: Any) -> Cut | None:
        """Where tensor ``t`` (or what it was computed from) left the graph, if recorded."""
        if not isinstance(t, Tensor):
            return None
        hit = self.cuts.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        return None

    def propagate(self, args: tuple[Any, ...], out: Tensor) -> bool:
        for a in args:
            cut = self.cut_of(a)
            if cut is None and isinstance(a, (list, tuple)):
                cut = next((c for c in map(self.cut_of, a) if c is not None), None)
            if cut is not None:
                self.cuts[id(out)] = (weakref.ref(out), cut)
                return True
        return False

    # -- .item() and friends ---------------------------------------------------------------------
    def on_item(self, raw: RawSite, op: str, value: Any, src: Tensor) -> None:
        cut = self.make_cut(raw, op, "item")
        if len(self.step_items) < 8 and cut not in self.step_items:
            self.step_items.append(cut)
        if cut not in self.cut_upstream and not any(r() is src for r, _ in self.kept_roots):
            self.cut_upstream[cut] = upstream_leaves(src, self._track_leaf)  # not a logged loss
        if isinstance(value, (float, int, complex)):
            self.items[id(value)] = (value, cut, weakref.ref(src))  # (the tensor: root_leaf.py)
            while len(self.items) > 256:
                self.items.popitem(last=False)

    def recent_items(self) -> list[Cut]:
        """The ``.item()``-style cuts of tensors that require grad made since the last
        backward() started (else those made before it): numbers that left the graph in the
        step that is failing."""
        return self.step_items or self.items_before

    def item_origin(self, data: Any) -> Cut | None:
        """The .item()/float() cut a Python number (or a list of them) came from."""
        values = data if isinstance(data, (list, tuple)) else (data,)
        for v in values[:64]:
            hit = self.items.get(id(v))
            if hit is not None and hit[0] is v:
                return hit[1]
        return None

    def note(self, kind: str, site: Site, op: str = "", detail: str = "",
             related: tuple[tuple[Site, str], ...] = ()) -> Counter:
        key = (kind, site, op)
        c = self.events.get(key)
        if c is None:
            c = self.events[key] = Counter(Event(kind, site, op, detail, related))
        else:
            c.count += 1
        return c

    # -- in-place and backward -------------------------------------------------------------------
    def on_inplace(self, raw: RawSite | None, op: str, info: tuple[Any, int, tuple[int, ...]],
                   after: Any) -> None:
        if raw is None:
            return
        gf, version, shape = info
        made = created_site(gf)[0] if gf is not None else None
        names = tuple(node_name(g) for g in (gf, after) if g is not None)
        self.inplace.append((self.site(raw), op, names, shape, version, made, layer_here(self)))
        stamp_view_write(gf, after, self.site(raw), op)
        self._check_accumulate(raw, op, gf, after)
        note_total(self, raw, op, gf, after)  # NOTE [total never backpropagated]

    def on_plain_inplace(self, raw: RawSite | None, op: str, version: int,
                         shape: tuple[int, ...], cut: Cut | None = None) -> None:
        """# NOTE [write into a tensor without grad]
        An in-place write, with grad on, into a tensor that does not require grad (targets,
        a mask, a detached copy): such a tensor is saved for backward when an op multiplies
        it with one that does (timm's ``AsymmetricLossSingleLabel``: ``xs_pos * targets``,
        then ``self.targets_classes.mul_(1 - eps)`` on the same tensor). The error then names
        no op ("[FloatTensor [16, 10]] is at version 3; expected version 1"): the write is
        the one of that shape whose version before it was the expected one. Kept apart from
        :attr:`inplace` (a few records, looked at only for such an error). A write into a
        detached copy (``cut``: the ``.detach()`` its value came from) keeps that line as where
        the tensor was made: NOTE [write into a detached copy]."""
        if raw is not None:
            made = cut.site if cut is not None and cut.reason == "detach" else None
            self.plain_inplace.append((self.site(raw), op, (), shape, version, made, None))

    def _check_accumulate(self, raw: RawSite, op: str, gf: Any, after: Any) -> None:
        """``total += loss`` on a tensor built before the last backward keeps old graphs alive
        (not in an unrolled computation: NOTE [losses kept alive])."""
        if gf is None or self.backward_count == 0 or op not in ("add_", "__iadd__"):
            return
        made, seq = created_site(gf)
        if made is not None and 0 <= seq < self.accumulating_seq:
            at = caller_of_argument(raw[0], after)  # NOTE [running total in a helper]
            at = at or returned_backpropagated(self, self.site(raw), gf, after)
            key = ("graph-kept", at or self.site(raw), op)
            c = self.events.get(key)
            if key in self.unrolled or (c is None or c.count < 8) and adds_chained(gf, after):
                self.unrolled.add(key)
                self.events.pop(key, None)
                return
            self.note(*key, "", ((made, "the running total was first built here"),))

    def on_backward_start(self, raw: RawSite | None, roots: Any = ()) -> None:
        if LOSS_LISTENERS and len(roots) == 1:  # a watch reads the loss (a functional one too)
            with torch._C.DisableTorchFunction():  # its detach() is not the user's
                for listen in list(LOSS_LISTENERS):
                    listen(roots[0])
        self.in_backward = True
        self.in_step = False
        self.clip_at = None
        if self.hooks_data is not None and len(self.hooks_data.optimizers) > 1:
            # NOTE [cleared gradients already used by a step] (loop_order.py)
            self.hooks_data.applied_around_backward(True)
        if self.clipped is not None:
            from gradtrace.runtime.trace.clip_target import settle
            settle(self)  # NOTE [clip of parameters no step uses]
        if self.backward_count == 0 and (self.fwd_hunt or self.fwd_nan is not None) or \
                self.fwd_nan_nograd and self.backward_count < 8 and not self.loss_nonfinite:
            from gradtrace.runtime.trace.fwd_nan import loss_checked
            loss_checked(self, roots)
        if self.backward_sites and (self.wiped_at is not None or not self.fresh_grads):
            self._before_backward()
        if self.hooks_data is not None and self.hooks_data.optimizers:
            from gradtrace.runtime.trace.loop_order import backward_starts
            backward_starts(self)  # NOTE [step before backward]
        self.clear_wiped()
        if self.step_items or self.items_before:
            self.items_before, self.step_items = self.step_items, []
        if raw is not None:
            self.backward_sites.append(self.site(raw))
            del self.backward_sites[:-64]
            if len(self.kept_roots) < 8 and len(roots) == 1:  # NOTE [losses kept alive]
                self.kept_roots.append((weakref.ref(roots[0]), self.backward_sites[-1]))
        if roots and (self.closure_watch is not None or self.closure_sum is not None):
            from gradtrace.runtime.trace.closure_sum import backward_starts as closure_backward
            closure_backward(self, self.backward_sites[-1] if raw is not None else None)
        if self.hooks_data is not None:
            from gradtrace.runtime.trace.unscaled import note_root
            from gradtrace.runtime.trace.windows import note_backward
            note_backward(self, self.hooks_data)  # NOTE [evaluation gradients applied]
            from gradtrace.runtime.trace.climbed_feed import note_backward as note_climbed
            note_climbed(self, self.hooks_data, self.backward_sites[-1] if raw else None, roots)
            if len(roots) == 1 and self.backward_count < 256:
                note_root(self, roots)  # NOTE [accumulated means not scaled]
        if self.backward_count < 256 and self.cuts:
            mark_root_cut(self, roots)  # NOTE [backward of a leaf]
        if self.backward_count < 3 and len(roots) == 1:  # NOTE [zero-derivative ops],
            from gradtrace.runtime.trace.graph_scan import scan_loss_graph  # [copied leaf]
            scan_loss_graph(self, roots[0])

    def _before_backward(self) -> None:
        """What happened to the previous backward()'s gradients: a step used them, or they
        were cleared before any step (NOTE [discarded gradients] in loop_order.py)."""
        last = self.backward_sites[-1]
        if self.wiped_at is not None:
            if len(self.discards) < 256:
                marks = tuple((id(r), len(r.windows)) for r in list(
                    self.hooks_data.optimizers.values())) if self.hooks_data is not None else ()
                self.discards.append((self.wiped_at, last, self.fresh_count, self.wiped_ids,
                                      marks))  # (the steps each optimizer had noted then)
            self.fresh_count = 0
        elif len(self.consumed_sites) < 256 or last in self.consumed_sites:
            self.consumed_sites[last] = max(self.consumed_sites.get(last, 0), self.fresh_count)

    def on_backward_done(self, raw: RawSite | None, seq: int, grad_call: bool = False) -> None:
        self.in_backward = False
        if self.hooks_data is not None and len(self.hooks_data.optimizers) > 1:
            self.hooks_data.applied_around_backward(False)  # (the same NOTE)
        if self.order is not None:
            from gradtrace.runtime.trace.loop_order import backward_ends
            backward_ends(self, self.backward_sites[-1] if raw is not None else None)
        self.fresh_count = self.fresh_count + 1 if self.fresh_grads else 1
        self.backward_count += 1
        if self.eval_filled is not None:  # NOTE [evaluation gradients applied]
            from gradtrace.runtime.trace.windows import eval_backward_done
            eval_backward_done(self)
        self.cuts_by_last_backward = len(self.cut_upstream)
        if self.meet_watch:
            watch_after_backward(self)
        if self.backward_count <= 4 and self.hooks_data is not None:
            self.hooks_data.note_backward_grads()  # NOTE [gradient cleared before the step]
        if self.hooks_data is not None and self.hooks_data.rows_used:
            from gradtrace.runtime.trace.row_decay import rows_after_backward
            rows_after_backward(self.hooks_data)  # NOTE [decayed rows]
        self.last_backward_seq = seq
        if not grad_call:  # autograd.grad: an inner step of MAML-like code, not a training step
            self.accumulating_seq = seq
        self.after_step = None
        self.fresh_grads = True
        self.clear_wiped()

    def stepped(self, site: Site | None, opt: Any, raw: Any = None) -> None:
        """An optimizer step ended (its line ``site``: where it first stepped; ``raw``: this
        step's own line, resolved only by a diagnosis); see step_caller.py
        (NOTE [step in a helper handed the optimizer])."""
        self.after_step = site
        self.step_raw = raw
        self.step_caller = step_caller(opt) if site is not None else None

    def on_failure(self, exc: BaseException, func: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any], raw: RawSite | None) -> None:
        if self.diagnose is None:
            return
        site = None if raw is None else self.site(raw)
        findings = self.diagnose(exc, func, args, kwargs, site, self)
        exc.__gradtrace__ = findings  # type: ignore[attr-defined]
        self.crash_findings.extend(findings)
