"""Patch stacks: parsing and linting patch files, applying them strictly, checking them against pinned sources."""
