#!/bin/bash
# runprobe.sh FILE... : gradtrace run each, print first finding vs ROOT lines
for f in "$@"; do
  roots=$(grep -n "# ROOT" "$f" | cut -d: -f1 | tr '\n' ' ')
  d=$(mktemp -d); cp "$(dirname $f)"/*.py "$d"/ 2>/dev/null
  (cd "$d" && timeout 120 python -m gradtrace run --json-out out.json "$(basename $f)" > run.out 2>&1)
  first=$(python -c "
import json,sys
try:
  d=json.load(open('$d/out.json'))
  fs=d['findings']
  print(' | '.join(f\"{x['code']}@{x.get('path','').split('/')[-1]}:{x.get('line')}\" for x in fs[:3]) or 'nothing')
except Exception as e: print('ERR', e)
")
  echo "$(basename $f) roots=[$roots] first: $first"
  rm -rf "$d"
done
