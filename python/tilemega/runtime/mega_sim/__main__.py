"""`python -m tilemega.runtime.mega_sim`: see cli.py."""

from .cli import main

raise SystemExit(main())
