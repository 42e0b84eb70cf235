"""The check cache: per-file results kept in ``.gradtrace_cache/`` so a re-check is almost free.

# NOTE [cache]
One pack file per configuration: ``<cache dir>/<gradtrace version>/<key>.json``, where the key
hashes everything besides the file's bytes that decides its findings: the cache format,
gradtrace's version and the size and mtime of its checker's sources (so an edited rule in a
development install is never answered from an old run), the Python version (``ast`` differs)
and the resolved settings (root included: per-file-ignores are relative to it). A pack maps
each file's absolute path to ``[blake2b of its bytes, day last used, findings]``, plus
``[[path, blake2b], ...]`` of the other files of the project its facts read
(NOTE [project index]); a file is answered from it only when the digest of the bytes read now
matches, and those of the other files too (an edited helper file changes the answer of its
callers), and each search of the project for a function's callers still finds the same files
(a ``<search>`` entry, NOTE [reverse index]). JSON, not pickle: a checked-out repository may ship a cache, and reading it must
never run code. A pack that does
not parse, or whose header names another key, is ignored and rewritten.

Writes go to a temporary file in the same folder and are moved into place with
``os.replace``, so a reader sees a whole old pack or a whole new one. Concurrent runs each
write a whole pack; before writing, a pack changed on disk since it was read is merged in, so
at worst one run's new entries are lost and recomputed next time. Worker processes
(``--jobs``) only return new entries; the main process writes. Size is bounded: entries unused
for ``MAX_AGE_DAYS`` go, a pack keeps at most ``MAX_ENTRIES``, the folder at most ``MAX_PACKS``.

Files that never mention ``torch`` are not cached (the prefilter costs what a lookup would),
nor are files on which a rule crashed (the crash must be reported every time).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from functools import lru_cache
from typing import Any, Callable, Sequence

from gradtrace import env
from gradtrace._version import __version__
from gradtrace.findings import Edit, Finding, Fix, Related
from gradtrace.lint import CheckResult, decode
from gradtrace.lint.config import Settings
from gradtrace.lint.prefilter import worth_checking

FORMAT = 1
DEFAULT_DIR = ".gradtrace_cache"
MAX_ENTRIES = 50_000
MAX_AGE_DAYS = 30
MAX_PACKS = 16
STALE_TMP_SECONDS = 3600
GITIGNORE = "# Automatically created by gradtrace.\n*\n"
CACHEDIR_TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
                "# This file is a cache directory tag created by gradtrace.\n")


def _today() -> int:
    return int(time.time() // 86400)


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Size and mtime of every source file of the checker (changes when a rule is edited)."""
    here = os.path.dirname(os.path.abspath(__file__))
    parts = []
    for root, dirs, files in os.walk(here):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                parts.append(f"{os.path.relpath(os.path.join(root, f), here)}:{st.st_size}:"
                             f"{st.st_mtime_ns}")
    findings = os.path.join(os.path.dirname(here), "findings.py")
    st = os.stat(findings)
    parts.append(f"findings.py:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=16).hexdigest()


def cache_key(settings: Settings) -> str:
    """The key of the pack for these settings (NOTE [cache])."""
    from dataclasses import replace

    resolved = replace(settings, root=os.path.abspath(settings.root))
    raw = json.dumps([FORMAT, __version__, code_fingerprint(), sys.version,
                      sys.implementation.cache_tag, repr(resolved)])
    return hashlib.blake2b(raw.encode(), digest_size=20).hexdigest()


def cache_dir_for(settings: Settings, option: str | None = None) -> str:
    """``--cache-dir``, else ``$GRADTRACE_CACHE_DIR``, else ``.gradtrace_cache`` in the project
    root (the folder of the pyproject.toml the settings came from, or the current folder)."""
    chosen = option or env.value(env.CACHE_DIR)
    if chosen:
        return os.path.abspath(chosen)
    return os.path.join(os.path.abspath(settings.root), DEFAULT_DIR)


def _encode(findings: Sequence[Finding], path: str) -> list[Any]:
    def p(x: str) -> str | None:
        return None if x == path else x

    out = []
    for f in findings:
        fix = None if f.fix is None else [
            f.fix.title, f.fix.safety,
            [[e.line, e.column, e.end_line, e.end_column, e.content] for e in f.fix.edits]]
        out.append([f.code, f.name, f.message, p(f.path), f.line, f.column, f.end_line,
                    f.end_column, f.severity, [[p(r.path), r.line, r.message, r.column]
                                               for r in f.related], fix, f.source])
    return out


def _decode(raw: list[Any], path: str) -> list[Finding]:
    """Inverse of :func:`_encode`; raises (TypeError, ValueError...) on a malformed entry."""
    out = []
    for (code, name, message, fpath, line, column, end_line, end_column, severity, related,
         fix, source) in raw:
        out.append(Finding(
            code=code, name=name, message=message, path=fpath or path, line=line,
            column=column, end_line=end_line, end_column=end_column, severity=severity,
            related=tuple(Related(rp or path, rl, rm, rc) for rp, rl, rm, rc in related),
            fix=None if fix is None else Fix(fix[0], fix[1], tuple(Edit(*e) for e in fix[2])),
            source=source))
    return out


def _deps_hold(deps: list[Any]) -> bool:
    """Whether every other file an entry's facts read still has the bytes it had."""
    for path, digest in deps:
        if path.startswith("<search>"):  # the files a search found (NOTE [reverse index])
            from gradtrace.lint.analysis.callers import search_digest
            if search_digest(path) != digest:
                return False
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except (OSError, TypeError):
            return False
        if hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
            return False
    return True


class FileCache:
    """Per-file results for one configuration (NOTE [cache]); picklable for worker processes."""

    def __init__(self, folder: str | None, key: str, entries: dict[str, list[Any]] | None = None
                 ) -> None:
        self.folder = folder
        self.key = key
        self.entries: dict[str, list[Any]] = entries or {}
        self.used: set[str] = set()  # entries answered from, whose day may need refreshing
        self._signature: tuple[int, int, int] | None = None  # of the pack file when read

    @property
    def pack(self) -> str | None:
        if self.folder is None:
            return None
        return os.path.join(self.folder, __version__, f"{self.key[:24]}.json")

    # -- reading -------------------------------------------------------------------------------
    @classmethod
    def open(cls, settings: Settings, folder: str | None = None) -> FileCache:
        """The cache for ``settings`` in ``folder`` (see :func:`cache_dir_for`), read if present."""
        cache = cls(cache_dir_for(settings, folder), cache_key(settings))
        cache.entries, cache._signature = cache._read()
        return cache

    def _read(self) -> tuple[dict[str, list[Any]], tuple[int, int, int] | None]:
        """The entries on disk (empty when missing, corrupt or foreign) and the file's signature."""
        pack = self.pack
        try:
            with open(pack, "rb") as fh:  # type: ignore[arg-type]
                st = os.fstat(fh.fileno())
                data = json.loads(fh.read())
        except (OSError, TypeError, ValueError, RecursionError):
            return {}, None
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        if (not isinstance(data, dict) or data.get("format") != FORMAT
                or data.get("key") != self.key or not isinstance(data.get("entries"), dict)):
            return {}, signature
        return data["entries"], signature

    @staticmethod
    def _entry_key(path: str) -> str:
        return os.path.normcase(os.path.abspath(path))

    def _lookup(self, key: str, digest: str, path: str, data: bytes) -> CheckResult | None:
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            if entry[0] != digest or len(entry) > 3 and not _deps_hold(entry[3]):
                return None
            findings = _decode(entry[2], path)
        except (TypeError, ValueError, IndexError, KeyError):
            return None
        result = CheckResult(files=1, findings=findings)
        if findings:
            text, _ = decode(data, path)
            if text is not None:
                result.sources[path] = text
        self.used.add(key)
        return result

    def check(self, path: str, data: bytes, compute: Callable[[], CheckResult]) -> CheckResult:
        """The result for a file's bytes: from the cache, or ``compute()`` recorded as new."""
        key = self._entry_key(path)
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        hit = self._lookup(key, digest, path, data)
        if hit is not None:
            return hit
        from gradtrace.lint.analysis.owners import begin_reads, reads
        begin_reads()
        result = compute()
        if not result.rule_errors:
            entry = [digest, _today(), _encode(result.findings, path)]
            deps = reads()  # the other files its facts read (NOTE [project index])
            if deps:
                entry.append(sorted(deps.items()))
            result.cache_entries[key] = entry
        return result

    def answer(self, files: list[str], result: CheckResult) -> list[str]:
        """Answer the files the cache knows into ``result``; return the others (to check)."""
        rest = []
        for path in files:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                rest.append(path)  # the worker reports it
                continue
            if not worth_checking(path, data):  # NOTE [torch prefilter]
                result.files += 1
                continue
            hit = self._lookup(self._entry_key(path),
                               hashlib.blake2b(data, digest_size=16).hexdigest(), path, data)
            if hit is None:
                rest.append(path)
            else:
                result.extend(hit)
        return rest

    def for_workers(self) -> FileCache:
        """An empty copy for worker processes: they only record new entries."""
        return FileCache(None, self.key)

    # -- writing -------------------------------------------------------------------------------
    def save(self, new: dict[str, list[Any]]) -> str | None:
        """Write the pack with the ``new`` entries; returns a problem to warn about, or None."""
        today = _today()
        stale = [k for k in self.used if self.entries[k][1] != today]
        if self.folder is None or (not new and not stale):
            return None
        try:
            self._prepare_folder()
            entries = self.entries
            signature = self._stat()
            if signature is not None and signature != self._signature:
                entries, _ = self._read()  # another run wrote meanwhile: keep its entries too
            for k in stale:
                mine = self.entries[k]
                if entries.get(k, mine) is mine or entries[k][:1] == mine[:1]:
                    entries[k] = [mine[0], today, *mine[2:]]
            entries.update(new)
            entries = self._bounded(entries, today)
            self._write({"format": FORMAT, "key": self.key, "entries": entries})
            self._prune()
        except OSError as exc:
            return f"cannot write the cache in {self.folder}: {exc.strerror or exc}"
        return None

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.pack)  # type: ignore[arg-type]
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _prepare_folder(self) -> None:
        folder = self.folder
        assert folder is not None
        os.makedirs(os.path.join(folder, __version__), exist_ok=True)
        for name, text in ((".gitignore", GITIGNORE), ("CACHEDIR.TAG", CACHEDIR_TAG)):
            target = os.path.join(folder, name)
            if not os.path.exists(target):
                self._atomic(target, text.encode())

    @staticmethod
    def _bounded(entries: dict[str, list[Any]], today: int) -> dict[str, list[Any]]:
        def day(e: Any) -> int:
            try:
                return int(e[1])
            except (TypeError, ValueError, IndexError):
                return -1

        fresh = {k: e for k, e in entries.items() if today - day(e) <= MAX_AGE_DAYS}
        if len(fresh) > MAX_ENTRIES:
            keep = sorted(fresh, key=lambda k: day(fresh[k]), reverse=True)[:MAX_ENTRIES]
            fresh = {k: fresh[k] for k in keep}
        return fresh

    def _write(self, doc: dict[str, Any]) -> None:
        data = json.dumps(doc, separators=(",", ":")).encode()
        self._atomic(self.pack, data)  # type: ignore[arg-type]

    @staticmethod
    def _atomic(target: str, data: bytes) -> None:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, 0o644)  # mkstemp makes it private; a cache is as readable as the tree
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _prune(self) -> None:
        """Keep at most MAX_PACKS packs (newest first); drop stale temporaries, empty folders."""
        folder = self.folder
        assert folder is not None
        packs, now = [], time.time()
        for sub in os.scandir(folder):
            if not sub.is_dir(follow_symlinks=False):
                continue
            for f in os.scandir(sub.path):
                try:
                    mtime = f.stat(follow_symlinks=False).st_mtime
                    if f.name.startswith(".tmp-"):
                        if now - mtime > STALE_TMP_SECONDS:
                            os.unlink(f.path)
                    elif f.name.endswith(".json"):
                        packs.append((mtime, f.path))
                except OSError:
                    continue
        packs.sort(reverse=True)
        for _, path in packs[MAX_PACKS:]:
            if path != self.pack:
                try:
                    os.unlink(path)
                    os.rmdir(os.path.dirname(path))  # fails unless the folder is now empty
                except OSError:
                    pass


def open_cache(settings: Settings, folder: str | None, disabled: bool) -> FileCache | None:
    """The cache for a `gradtrace check` run, or None (``--no-cache``, ``$GRADTRACE_NO_CACHE``)."""
    if disabled or env.is_on(env.NO_CACHE):
        return None
    return FileCache.open(settings, folder)
