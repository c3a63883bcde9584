"""The outside world and local state: subprocesses, HTTP, files, the store, signals, progress."""
