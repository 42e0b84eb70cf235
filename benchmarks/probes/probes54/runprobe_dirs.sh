#!/bin/bash
# runprobe_dirs.sh ITEM... : gradtrace run each file (or DIR/train.py of a directory project); first findings vs ROOT lines
for a in "$@"; do
  if [ -d "$a" ]; then src="$a"; main=train.py; else src=$(dirname "$a"); main=$(basename "$a"); fi
  roots=$(cd "$src"; if [ -d "../$(basename $a)" ] && [ -d "$a" ] 2>/dev/null; then :; fi; grep -n "# ROOT" $( [ -d "$OLDPWD/$a" ] && echo *.py || echo "$main") /dev/null | cut -d: -f1,2 | tr '\n' ' ')
  d=$(mktemp -d); if [ -d "$a" ]; then cp "$a"/*.py "$d"/; else cp "$a" "$d"/; fi
  (cd "$d" && timeout 120 python -m gradtrace run --json-out out.json "$main" > run.out 2>&1)
  first=$(python -c "
import json
try:
  fs=json.load(open('$d/out.json'))['findings']
  print(' | '.join(f\"{x['code']}@{x.get('path','').split('/')[-1]}:{x.get('line')}\" for x in fs[:3]) or 'nothing')
except Exception as e: print('ERR', e)
")
  echo "$(basename $a) roots=[$roots] first: $first"
  rm -rf "$d"
done
