"""`python -m gradtrace` is `gradtrace`."""
from gradtrace.cli import main

raise SystemExit(main())
