"""The tables :mod:`gradtrace.runtime.fuse` ranks with: which static rules can cause each
runtime symptom family, which family each runtime code reports, which runtime findings name the
exact operation, and which static findings a run without the symptom refutes."""
from __future__ import annotations

# symptom family -> the static rules that can cause it
EXPLAINS: dict[str, frozenset[str]] = {
    "graph-cut": frozenset({"GT101", "GT102", "GT103", "GT104", "GT105", "GT106", "GT107",
                            "GT108", "GT109", "GT110", "GT201", "GT202", "GT203", "GT204", "GT205",
                            "GT207", "GT407", "GT408", "GT431", "GT111", "GT208", "GT209",
                            "GT210", "GT112", "GT213", "GT214", "GT445", "GT113",
                            "GT215", "GT216", "GT230", "GT720", "GT220", "GT580",
                            "GT611", "GT119", "GT122"}),
    "not-optimized": frozenset({"GT401", "GT402", "GT403", "GT404", "GT406", "GT409", "GT410",
                                "GT420", "GT421", "GT435", "GT437", "GT438", "GT439", "GT440",
                                "GT109", "GT413", "GT442", "GT444", "GT445", "GT446",
                                "GT447", "GT214", "GT448", "GT215", "GT462", "GT464",
                                "GT474", "GT559", "GT560", "GT490"}),
    "freed-graph": frozenset({"GT505", "GT506", "GT507", "GT508", "GT509", "GT601", "GT521",
                              "GT570", "GT535", "GT528"}),
    "empty-optimizer": frozenset({"GT401", "GT402", "GT403", "GT405", "GT407", "GT408",
                                  "GT420", "GT421", "GT431", "GT444", "GT464"}),
    "accumulate": frozenset({"GT501", "GT502", "GT503", "GT517", "GT523", "GT721"}),
    "clip": frozenset({"GT504", "GT514"}),
    "graph-kept": frozenset({"GT505"}),
    "inplace-saved": frozenset({"GT601", "GT602", "GT603", "GT605", "GT521", "GT609"}),
    "inplace-leaf": frozenset({"GT302", "GT133"}),
    "number": frozenset({"GT101", "GT102"}),
    "grad-none": frozenset({"GT301", "GT303", "GT305", "GT307", "GT403", "GT407", "GT408", "GT156",
                            "GT474"}),  # NOTE [wrapped leaf handed away]
    "inference": frozenset({"GT204"}),
    "non-leaf-optimizer": frozenset({"GT305", "GT306", "GT403", "GT485"}),
    "function-count": frozenset({"GT701"}),
    "unused-input": frozenset({"GT702", "GT706"}),
    "none-result": frozenset({"GT511"}),
    "non-scalar": frozenset({"GT510", "GT703", "GT715"}),
    "grad-shape": frozenset({"GT716"}),
    "ddp-unused": frozenset({"GT450", "GT451", "GT452", "GT459", "GT611"}),
    "ddp-unsynced": frozenset({"GT453", "GT454", "GT542"}),
    "ddp-desync": frozenset({"GT455"}),
    "ddp-ready-twice": frozenset({"GT460", "GT134"}),
    "non-finite": frozenset({"GT751", "GT752", "GT753", "GT754", "GT755", "GT756", "GT759",
                             "GT769", "GT776", "GT139", "GT766"}),
    "optimizer-rebuilt": frozenset({"GT436"}),
    "schedule": frozenset({"GT515"}),
    "eval-mode": frozenset({"GT516", "GT551"}),
    "discard": frozenset({"GT512", "GT518", "GT522"}),
    "rejected-assignment": frozenset({"GT415", "GT416"}),
    "idle-step": frozenset({"GT707", "GT431", "GT441", "GT432", "GT530"}),
    # no optimizer ever stepped (GT913): the static finding that says why leads
    "never-stepped": frozenset({"GT429", "GT437", "GT539", "GT544", "GT547"}),
    "dropped-result": frozenset({"GT708"}),
    "clip-scaled": frozenset({"GT524"}),
    "schedule-unit": frozenset({"GT526"}),
    "inplace-caller": frozenset({"GT607"}),
    "view-inplace": frozenset({"GT606"}),
    "scaler-order": frozenset({"GT525"}),
    "checkpoint": frozenset({"GT205"}),
    "listed-twice": frozenset({"GT435"}),
    "dead-term": frozenset({"GT101", "GT102", "GT103", "GT104", "GT105", "GT107", "GT108",
                            "GT111", "GT201", "GT202", "GT216", "GT218"}),
    "bce-input": frozenset({"GT760"}),
    "softmax-singleton": frozenset({"GT762"}),
    "frozen-stats": frozenset({"GT461", "GT443"}),
    "functional-dropout": frozenset({"GT548"}),
    "clip-other": frozenset({"GT549"}),
    "eval-in-train": frozenset({"GT550"}),
    "shared-layer": frozenset({"GT446"}),  # the list multiplied names the line that built it
    "needs-guard": frozenset({"GT718"}),  # a gradient computed under another input's flag
    "window-early": frozenset({"GT536"}),  # NOTE [window starts one pass early]
    "aliased": frozenset({"GT543"}),  # NOTE [parameters over one tensor]
    # a tensor in two groups: a loop over modules() gathered it twice, the line named
    # by NOTE [parameter gathered twice]
    "two-groups": frozenset({"GT557", "GT562", "GT563"}),
}
# runtime finding code -> the symptom families it reports
_FAMILY: dict[str, tuple[str, ...]] = {
    "GT800": ("graph-cut", "empty-optimizer"), "GT820": ("graph-cut", "grad-none"),
    "GT101": ("number", "graph-cut"), "GT102": ("graph-cut",),
    "GT104": ("graph-cut",), "GT105": ("graph-cut",), "GT107": ("graph-cut",),
    "GT108": ("graph-cut",), "GT201": ("graph-cut",), "GT202": ("graph-cut",),
    "GT203": ("graph-cut",), "GT204": ("inference",),
    "GT821": ("not-optimized",), "GT401": ("not-optimized", "empty-optimizer"),
    "GT402": ("not-optimized",), "GT407": ("graph-cut",), "GT404": ("not-optimized",), "GT410": ("not-optimized",),
    "GT803": ("freed-graph",), "GT506": ("freed-graph",), "GT507": ("freed-graph",),
    "GT508": ("freed-graph",), "GT509": ("freed-graph",), "GT809": ("empty-optimizer",),
    "GT405": ("empty-optimizer",), "GT823": ("accumulate",), "GT501": ("accumulate",),
    "GT824": ("clip",), "GT504": ("clip",), "GT826": ("graph-kept",), "GT505": ("graph-kept",),
    "GT804": ("inplace-saved",), "GT601": ("inplace-saved",), "GT602": ("inplace-saved",),
    "GT805": ("inplace-leaf",), "GT302": ("inplace-leaf",), "GT806": ("number",),
    "GT801": ("grad-none",), "GT301": ("grad-none",), "GT305": ("grad-none",),
    "GT307": ("grad-none",), "GT822": ("grad-none",), "GT808": ("inference",),
    "GT810": ("non-leaf-optimizer",), "GT306": ("non-leaf-optimizer",),
    "GT811": ("function-count",), "GT701": ("function-count",), "GT812": ("unused-input",),
    "GT702": ("unused-input",), "GT813": ("none-result",), "GT511": ("none-result",),
    "GT802": ("non-scalar",), "GT510": ("non-scalar",),
    "GT420": ("not-optimized", "empty-optimizer"), "GT421": ("not-optimized", "empty-optimizer"),
    "GT880": ("ddp-unused",), "GT881": ("ddp-unused",), "GT884": ("ddp-unsynced",),
    "GT882": ("ddp-ready-twice",), "GT883": ("ddp-desync",), "GT885": ("ddp-desync",), "GT455": ("ddp-desync",),
    "GT450": ("ddp-unused",), "GT451": ("ddp-unused",), "GT452": ("ddp-unused",),
    "GT453": ("ddp-unsynced",), "GT454": ("ddp-unsynced",), "GT887": ("ddp-unsynced",),
    "GT703": ("non-scalar",), "GT715": ("non-scalar",),
    "GT830": ("grad-shape",), "GT716": ("grad-shape",),
    "GT825": ("non-finite",), "GT851": ("non-finite",), "GT751": ("non-finite",),
    "GT752": ("non-finite",), "GT893": ("non-finite",),
    "GT753": ("non-finite",), "GT754": ("non-finite",), "GT755": ("non-finite",),
    "GT503": ("accumulate",), "GT406": ("not-optimized",), "GT515": ("schedule",),
    "GT829": ("optimizer-rebuilt",), "GT436": ("optimizer-rebuilt",),
    "GT208": ("graph-cut",), "GT209": ("graph-cut",), "GT210": ("graph-cut",), "GT517": ("accumulate",),
    "GT605": ("inplace-saved",), "GT706": ("unused-input",),
    "GT516": ("eval-mode",), "GT827": ("discard",), "GT512": ("discard",),
    "GT816": ("rejected-assignment",), "GT840": ("idle-step",), "GT913": ("never-stepped",), "GT849": ("not-optimized",), "GT756": ("non-finite",), "GT521": ("freed-graph",),
    "GT708": ("dropped-result",), "GT524": ("clip-scaled",), "GT526": ("schedule-unit",),
    "GT848": ("inplace-caller",), "GT832": ("view-inplace",),
    "GT834": ("scaler-order",), "GT205": ("checkpoint",), "GT435": ("listed-twice",),
    "GT844": ("dead-term",), "GT838": ("bce-input",), "GT856": ("not-optimized",),
    "GT877": ("softmax-singleton",), "GT841": ("frozen-stats",),
    "GT875": ("functional-dropout",), "GT876": ("clip-other",), "GT874": ("eval-in-train",),
    "GT843": ("shared-layer",), "GT845": ("needs-guard",), "GT879": ("window-early",),
    "GT891": ("accumulate",), "GT872": ("aliased",), "GT543": ("aliased",),
    "GT817": ("two-groups",),
    "GT559": ("not-optimized",), "GT560": ("not-optimized",), "GT776": ("non-finite",),
}
# Runtime findings whose line is the exact operation that caused the symptom (the detach, the
# in-place write...): a static finding elsewhere in the file is another bug, not this one.
_EXACT = frozenset({"GT101", "GT104", "GT105", "GT107", "GT108", "GT301", "GT302", "GT305",
                    "GT402", "GT504", "GT505", "GT511", "GT602", "GT702",
                    "GT804", "GT805", "GT826", "GT303", "GT304", "GT508", "GT509", "GT708",
                    "GT524", "GT526", "GT848"})
# Runtime findings that lead over a static finding on one of their context lines only (not one
# elsewhere in the file): GT891 names the clearing after an LBFGS step (seen at run time) with
# the closure's backward() as context, where the static GT721 points: the clearing is the line to
# move (NOTE [closure evaluations summed]). Not GT601: the static
# GT601 itself now tells the two shapes apart, at the read of a value the step made stale (the
# line the runtime names too: SRGAN's `fake_out`) and at the step for a graph kept by
# `retain_graph=True` and read again after it (encodec's `fmap_real`, where moving the step is
# the fix and the runtime's read is one of several), so on the step line it leads.
_LEADS_CONTEXT = frozenset({"GT891"})
# (runtime code, static code) where the static finding names the block (or the call of the
# helper holding it) and the runtime the statement in it that the block cut: the statement
# leads, the block is its context. GT218 names the `with no_grad()` a loss term was computed
# under, GT202 the call of a helper that computes a term under no_grad; GT844 names the
# statement that read the live value, the one to take out of the block when others in it stay
# (a perceptual loss's features of the real image): NOTE [term read under no_grad]. GT201 names
# the call whose output left the graph under a no-grad helper; GT202 names that helper's
# decorator or block, which is library-like code the caller chose to call (a `generate()`
# used for a policy gradient): the call leads.
_STATEMENT_LEADS = frozenset({("GT844", "GT218"), ("GT844", "GT202"), ("GT201", "GT202")})
# Runtime findings about one optimizer's lines (GT827 names the step or zero_grad() of one
# optimizer, with its backward() as context): a static finding confirms it on those lines only,
# never a loop-order finding about another optimizer elsewhere in the file (a GAN's
# discriminator step; NOTE [step before backward] in runtime/trace/loop_order.py).
_LINES_ONLY = frozenset({"GT827"})
# Families specific enough that the only candidate in the files that ran explains the symptom
# even in another file (the model's file vs the training script).
# runtime code -> static rules whose object is never among what it names: GT820 lists registered
# parameters never graded, and GT403's moved copy is never a registered parameter (a move that
# returns the Parameter itself is harmless) (Graph-WaveNet, docs/triage/unseen14.md)
_NEVER_NAMED: dict[str, frozenset[str]] = {"GT820": frozenset({"GT403"})}
_SPECIFIC = frozenset({"freed-graph", "accumulate", "empty-optimizer", "not-optimized"})
# Families where the runtime sees which of two lines both faces name is the cause (the backward()
# that added into a stale .grad, not the step() that applied the sum): its line leads.
_RUNTIME_PICKS = frozenset({"accumulate"})
# Static rules whose symptom the runtime checks by itself (a crash, a parameter that never gets
# a gradient, gradients accumulating...): once the run got through a backward() (and, for the
# loop-order rules, two optimizer steps) on code that holds such a finding without showing the
# symptom, the run refutes the finding and it is left out. -> optimizer steps needed.
# (Not GT301: a rebound leaf is never *updated*, which the run does not check; its gradients
# still flow, so a run without a symptom proves nothing.)
_REFUTABLE: dict[str, int] = {
    **dict.fromkeys(("GT101", "GT102", "GT104", "GT105", "GT107", "GT108", "GT201", "GT203",
                     "GT204", "GT205", "GT302", "GT506", "GT507", "GT508", "GT509",
                     "GT510", "GT511", "GT601", "GT602", "GT603", "GT701", "GT702",
                     "GT715", "GT716"), 0),
    **dict.fromkeys(("GT401", "GT402", "GT404", "GT410", "GT504", "GT442"), 1),
    **dict.fromkeys(("GT501", "GT502", "GT503", "GT505"), 2),
}
# Runtime codes two mechanisms report for one bug (the parameters a reentrant checkpoint left
# without gradients and torch's warning at the checkpoint, on one line; torch's warning about a
# group listing a tensor twice and the static GT435 another finding confirmed, in one file):
# shown once.
_SEEN_TWICE = {"GT205": "line", "GT435": "file"}
