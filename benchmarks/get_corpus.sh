#!/usr/bin/env bash
# Download real PyTorch projects' sources from their wheels/sdists on PyPI into benchmarks/corpus
# (not committed). Used by check_speed.py and by the precision triage in docs/triage/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/corpus}
mkdir -p "$dest/dl" "$dest/src"
pip download --no-deps --quiet -d "$dest/dl" \
    transformers==5.24.0 diffusers==0.42.1 lightning==2.6.6 timm==1.0.31 fairseq==0.12.2 \
    "torchvision==0.29.1"
for f in "$dest"/dl/*.whl; do
    python -m zipfile -e "$f" "$dest/src/$(basename "$f" .whl)"
done
for f in "$dest"/dl/*.tar.gz; do
    tar xzf "$f" -C "$dest/src"
done
echo "corpus in $dest/src: $(find "$dest/src" -name '*.py' | wc -l) files"
