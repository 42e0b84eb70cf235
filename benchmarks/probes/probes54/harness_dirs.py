"""Like ../lead53/harness.py, but each argument may be a directory project (checked as a whole);
no argument: every probe and project beside this file."""
import glob, json, os, subprocess, sys

hits = 0
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:] or sorted(p for p in glob.glob(os.path.join(here, '*'))
                             if os.path.isdir(p) or p.endswith('.py') and 'harness' not in p)
for a in args:
    files = sorted(glob.glob(os.path.join(a, '*.py'))) if os.path.isdir(a) else [a]
    out = subprocess.run([sys.executable, '-m', 'gradtrace', 'check', '--format', 'json', '--exit-zero',
                          '--no-cache', *files], capture_output=True, text=True)
    fs = json.loads(out.stdout)['findings']
    roots = {(os.path.abspath(f), i) for f in files for i, l in enumerate(open(f), 1) if '# ROOT' in l}
    got = [(f['code'], os.path.basename(f['path']), f['line']) for f in fs]
    ok = any((os.path.abspath(f['path']), f['line']) in roots for f in fs) if roots else not fs
    hits += ok
    print('OK  ' if ok else 'MISS', os.path.basename(a.rstrip('/')),
          sorted((os.path.basename(p), l) for p, l in roots), got)
print(hits, '/', len(args))
