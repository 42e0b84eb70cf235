"""GT000-GT002: what the checker reports about a file itself rather than about its code."""
from __future__ import annotations

from gradtrace.code_tables import Code

CODES = (
    Code("GT000", "syntax-error",
         "The file could not be parsed (or decoded); nothing else in it was checked.",
         "The checker reads a file with Python's own parser. A file with a syntax error, bytes "
         "that are not valid in its declared encoding, or nesting deeper than `ast.parse` "
         "accepts has no syntax tree, so no rule can look at it.",
         """
         def train(model:
             pass
         """,
         """
         def train(model):
             pass
         """,
         "Fix the syntax error (the finding gives its line), or the encoding declaration.",
         "gradtrace.lint", "engine"),
    Code("GT001", "io-error", "The file could not be read.",
         "The path exists but reading it failed (permissions, a broken link, a device error); "
         "it was not checked and the run exits 1 like any finding.",
         "# a file the user running gradtrace may not read (chmod 000 train.py)",
         "# the same file, readable (chmod 644 train.py)",
         "Make the file readable, or exclude it (`--extend-exclude`).",
         "gradtrace.lint", "engine"),
    Code("GT002", "internal-error",
         "A rule (or the engine) raised on the file; the other rules and files were checked, "
         "and the run exits 2.",
         "A crash in one rule must not hide the findings of the others. The finding names the "
         "rule and the line of gradtrace's own code that raised, so it can be reported; "
         "`GRADTRACE_STRICT=1` makes it a traceback instead (for gradtrace's own tests).",
         "# any file on which a rule raises (a bug in gradtrace, not in the file)",
         "# the same file once the rule is fixed",
         "Report it with the file (or a small part of it that still raises); meanwhile "
         "`--ignore` the rule named in the message.",
         "gradtrace.lint.engine", "engine"),
)
