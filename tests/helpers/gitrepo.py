"""Small real git repositories for tests."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin"}


class Repo:
    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    @classmethod
    def copy_of(cls, template: Repo, path: Path) -> Repo:
        """A copy of `template` at `path` (the same commits), to change freely."""
        shutil.copytree(template.path, path, symlinks=True)
        repo = cls.__new__(cls)
        repo.path = path
        return repo

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def git(self, *args) -> str:
        return subprocess.run(["git", *args], cwd=self.path, check=True, capture_output=True, text=True,
                              env={**ENV, "HOME": str(self.path)}).stdout.strip()

    def commit(self, files: dict, message: str, tag: str | None = None) -> str:
        for rel, content in files.items():
            target = self.path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if content is None:
                target.unlink()
            elif isinstance(content, tuple) and content[0] == "symlink":
                if target.exists() or target.is_symlink():
                    target.unlink()
                target.symlink_to(content[1])
            else:
                target.write_text(content)
        self.git("add", "-A")
        self.git("commit", "-qm", message)
        if tag:
            self.git("tag", "-a", tag, "-m", tag)
        return self.git("rev-parse", "HEAD")
