"""`python -m cudalearn COMMAND`: the `cudalearn` console command, where only the interpreter is on PATH."""

from cudalearn.cli import main

raise SystemExit(main())
