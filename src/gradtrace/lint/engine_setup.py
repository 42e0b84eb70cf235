"""Setting up a :class:`gradtrace.lint.engine.FileChecker` for one file: the module-level
imports, and which rules are active there, with their visitors and the lines their trigger
words gate (NOTE [gated lines] and NOTE [quiet subtrees] in :mod:`gradtrace.lint.engine`)."""
from __future__ import annotations

import ast
from functools import lru_cache
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple, Sequence

from gradtrace.lint import function_gate
from gradtrace.lint.code_text import may_hold
from gradtrace.lint.rule import Rule
from gradtrace.lint.step_files import holds_step
from gradtrace.lint.visitors import KEYWORDS, by_trigger, spelt, walk_keys
from gradtrace.lint.visitors import visitor_names as _visitor_names
from gradtrace.lint.words import line_word_lines, token_word_lines
from gradtrace.lint.words import word_lines as _word_lines

if TYPE_CHECKING:
    from gradtrace.lint.engine import Visitor


@lru_cache(maxsize=16)
def _split_words(rules: tuple[type[Rule], ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(the trigger words whose lines matter: words of rules the walk reaches, the other
    words: only whether they occur decides, for rules whose only visitor is ``visit_Module``)."""
    lines = frozenset(w for r in rules if _walks(r) for w in (*r.triggers, *r.statement_triggers))
    return lines, _all_words(rules) - lines


@lru_cache(maxsize=None)
def _walks(cls: type[Rule]) -> bool:
    """Whether a rule has a visitor other than ``visit_Module`` (one that the walk reaches)."""
    return any(t is not ast.Module for t, _, _ in _visitor_names(cls))


@lru_cache(maxsize=16)
def _all_words(rules: tuple[type[Rule], ...]) -> frozenset[str]:
    """Every trigger word of ``rules`` (both kinds)."""
    return frozenset(w for r in rules for w in (*r.triggers, *r.statement_triggers))


@lru_cache(maxsize=4096)
def _inside(qual: str, words: frozenset[str]) -> frozenset[str]:
    """The ``words`` that an imported name holds (``probe2`` of ``x.probe2``), per process."""
    return frozenset(w for w in words if w in qual)


class _Plan(NamedTuple):
    """The word sets of one list of rule types, made once per process (not once per file)."""

    all_words: frozenset[str]
    other_words: frozenset[str]  # words of visit_Module-only rules: whether they occur
    req_words: frozenset[str]  # NOTE [function requires]
    keys: frozenset[str]  # whole words (NOTE [keyword lines])
    base: frozenset[str]  # the words whose lines are searched (operators: substrings)
    cached: frozenset[str]  # the words searched through the line cache (NOTE [line cache])
    runs: frozenset[str]  # the keywords searched there as whole runs
    by_word: dict[str, tuple[int, ...]]  # trigger word -> positions of its rules


@lru_cache(maxsize=16)
def _plan(rules: tuple[type[Rule], ...]) -> _Plan:
    line_words, other_words = _split_words(rules)
    req_words, req_keys = function_gate.required_words(rules)
    keys = req_keys | walk_keys(rules)
    base = line_words.union(("import",), req_words, spelt(keys))
    return _Plan(_all_words(rules), other_words, req_words, keys, base,
                 base | other_words.difference(keys), keys - base, by_trigger(rules))


class CheckerSetup:
    """The set-up half of :class:`~gradtrace.lint.engine.FileChecker`, a base class of it."""

    # -- set-up ------------------------------------------------------------------------------
    def _collect_top_imports(self, body: list[ast.stmt]) -> None:
        for s in body:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                self.imports.add(s)
            elif isinstance(s, (ast.If, ast.Try)):
                self._collect_top_imports(s.body)
                self._collect_top_imports(getattr(s, "orelse", []))
                for h in getattr(s, "handlers", []):
                    self._collect_top_imports(h.body)

    def _activate(self, rules: Sequence[Rule | type[Rule]]) -> None:
        """Which rules are active in this file, and on which lines (NOTE [triggers])."""
        types = tuple(rules)
        if not all(map(isinstance, types, repeat(type))):
            types = tuple(r if isinstance(r, type) else type(r) for r in rules)
        stepless: bool | None = None  # no training step in the file (NOTE [step files])
        plan = _plan(types)
        all_words = plan.all_words
        # local aliases of imported names that contain a trigger word (`import x as probe2`)
        aliases: dict[str, set[str]] = {}
        for local, qual in self.imports.aliases.items():
            if local != qual.rpartition(".")[2]:
                inside = _inside(qual, all_words)
                if inside:
                    aliases[local] = set(inside)
        other_words, keys, base = plan.other_words, plan.keys, plan.base
        code = self.ctx.code
        function_gate.add_aliases(aliases, self.imports.aliases, plan.req_words)
        searched = base.union(aliases) if aliases else base
        # the words of every file through the line cache (NOTE [line cache]), those of
        # visit_Module-only rules too (whether they occur); a file's own aliases apart
        found = line_word_lines(code, plan.cached, plan.runs)
        if found is not None:
            word_lines = found
            extra = searched.difference(base, other_words)
            if extra:
                word_lines.update(_word_lines(code, extra))
            idents: str | None | bool = False  # not needed: other_words were searched
        else:
            got = token_word_lines(code, searched, keys - searched)  # NOTE [token lines]
            if got is None:
                idents = self.ctx.identifiers
                word_lines = _word_lines(code, searched | keys, idents)
            else:
                word_lines, idents = got
                self.ctx.know_identifiers(idents)
        key_lines = {k: word_lines.get(k, ()) for k in keys}  # before other_words' entries
        for w in other_words:  # words of visit_Module-only rules: whether, not where
            if idents is False:  # found with the lines, but a keyword as a whole word
                hit = w in code if w in keys else w in word_lines
            else:
                hit = may_hold(idents, w) and w in code  # type: ignore[arg-type]
            if hit:
                word_lines[w] = set()
        present = [w for w in word_lines if w in all_words or w in aliases]
        if not present:
            return
        self._import_lines = sorted(word_lines.get("import", ()))
        hit_lines: set[int] = set()
        self._skip_quiet = True
        expr_words: dict[str, list[int]] = {}  # word -> active rules with expression visitors
        fn_lines: set[int] = set()
        module_closed: set[int] = set()  # "function" rules that find nothing at module level

        def found_in(words: tuple[str, ...]) -> list[str]:
            if aliases:
                ws = set(words)
                words = (*words, *(a for a, inside in aliases.items() if inside & ws))
            return [w for w in words if w in word_lines]

        # rules of one family share their trigger words: each distinct set of found words is
        # joined into lines (and sorted) once per file, and added to the hit lines once
        gates: dict[tuple[str, ...], tuple[set[int], list[int] | None]] = {}
        hit_words: set[tuple[str, ...]] = set()
        key_types: set[type] = set()  # statement types whose keyword lines are hit lines
        by_word = plan.by_word  # only a rule with a trigger word found can be active
        words = set(word_lines).union(*(ws for a, ws in aliases.items() if a in word_lines))
        for j in sorted({j for w in words.intersection(by_word) for j in by_word[w]}):
            rule = rules[j]
            if rule.needs_step:
                if stepless is None:
                    stepless = not holds_step(self.ctx.code)
                if stepless:
                    continue
            found = found_in(rule.triggers)
            key = tuple(found_in(rule.statement_triggers) if rule.statement_triggers else found)
            if found and rule.function_requires:  # NOTE [function requires]
                found, key = function_gate.restricted(self.tree, rule, found, key, word_lines,
                                                      found_in)
            if not found:
                continue
            rule = rule() if isinstance(rule, type) else rule
            i = len(self.rules)
            self.rules.append(rule)
            got = gates.get(key)
            if got is None:
                got = gates[key] = (set().union(*(word_lines[w] for w in key)), None)
            gate = got[0]
            if _walks(type(rule)):  # NOTE [quiet subtrees]: only words of rules that look inside
                for ws in (key, tuple(found)):
                    if ws not in hit_words:
                        hit_words.add(ws)
                        hit_lines.update(*(word_lines[w] for w in ws))
            gated = rule.gate_statements is True
            if gated and got[1] is None:
                got = gates[key] = (gate, sorted(gate))
            self._rule_lines.append(got[1] if gated else [])  # read by _gated only
            self._line_gated.append(gated)
            exprs: dict[type, Visitor] = {}
            for t, attr, is_stmt in _visitor_names(type(rule)):
                if is_stmt and t is not ast.Module and rule.gate_statements is not True:
                    if rule.gate_statements == "function":
                        fn_lines |= gate
                        self._fn_types.add(t)
                        if rule.function_requires:  # nothing outside functions
                            module_closed.add(i)  # NOTE [function requires]
                        else:
                            self._fn_open[0] = True  # module level: see every statement
                        if not self._fn_rules or self._fn_rules[-1][0] != i:
                            if got[1] is None:
                                got = gates[key] = (gate, sorted(gate))
                            self._fn_rules.append((i, got[1]))
                    elif t in KEYWORDS:  # NOTE [keyword lines]
                        if t not in key_types:
                            key_types.add(t)
                            hit_lines.update(*(key_lines[k] for k in KEYWORDS[t]))
                    else:
                        self._skip_quiet = False
                if is_stmt:
                    self._stmt_visitors.setdefault(t, []).append((i, getattr(rule, attr)))
                    if rule.gate_statements is True:
                        self._gated_types.add(t)
                else:
                    exprs[t] = getattr(rule, attr)
            self._expr_visitors.append(exprs)
            if exprs:
                for w in found:
                    expr_words.setdefault(w, []).append(i)
        per_line: dict[int, frozenset[int]] = {}
        for w, idx in expr_words.items():
            group = frozenset(idx)
            for line in word_lines[w]:
                known = per_line.get(line)
                per_line[line] = group if known is None else known | group
        self._line_rules = per_line
        groups: dict[int, tuple[list[int], list[int]]] = {}  # the rules of one list of lines
        for i, lines in enumerate(self._rule_lines):  # (gated rules of one key share it)
            if lines:
                group = groups.get(id(lines))
                if group is None:
                    groups[id(lines)] = (lines, [i])
                else:
                    group[1].append(i)
        by_line: dict[int, frozenset[int]] = {}  # NOTE [gated lines]
        for lines, rules_of in groups.values():
            these = frozenset(rules_of)
            for line in lines:
                known = by_line.get(line)
                by_line[line] = these if known is None else known | these
        self._gated_by_line = by_line
        self._fn_lines = sorted(fn_lines)
        self._fn_ids = frozenset(i for i, _ in self._fn_rules)
        if module_closed:
            closed = frozenset(module_closed)
            self._fn_closed[0] = self._closed_tables[closed] = {None: closed}
        self._hit_lines = sorted(hit_lines)
