#!/usr/bin/env bash
# The precision gate's second corpus ("c2"): the packages of docs/triage/corpus2.md that still
# download, as wheels at their pinned versions (sdists where no wheel exists). Not committed.
# Usage: bash benchmarks/get_gate_corpora.sh DEST   (then: python benchmarks/precision_gate.py)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/corpus2}
mkdir -p "$dest/dl" "$dest/src"
pkgs=$(sed -n 's/^| [1-4] | \(.*\) | [0-9,]* | [0-9,]* |$/\1/p' "$here/../docs/triage/corpus2.md" |
       tr ',' '\n' | sed 's/([^)]*)//g; s/^ *//; s/ *$//' | awk 'NF==2 {print $1"=="$2}')
for p in $pkgs; do
    pip download --no-deps --quiet -d "$dest/dl" "$p" 2>/dev/null ||
        pip download --no-deps --quiet --no-binary :all: -d "$dest/dl" "$p" 2>/dev/null ||
        echo "not downloaded: $p" >&2
done
for f in "$dest"/dl/*.whl; do
    [ -d "$dest/src/$(basename "$f" .whl)" ] || python -m zipfile -e "$f" "$dest/src/$(basename "$f" .whl)"
done
for f in "$dest"/dl/*.tar.gz; do
    tar xzf "$f" -C "$dest/src" 2>/dev/null
done
echo "corpus in $dest/src: $(find "$dest/src" -name '*.py' | wc -l) files"
