"""`python -m cpytree.harness`."""

from .cli import main

raise SystemExit(main())
