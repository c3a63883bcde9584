"""What enginebuild remembers between runs in `$ENGINEBUILD_HOME`, beside the store: the no-op
memo (`memo.py`) and what each node was last built from (`history.py`). Standard library and
`io` only: the no-op fast path imports the memo."""
