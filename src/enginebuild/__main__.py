from enginebuild.cli import console

console(name=None)  # `python -m enginebuild`: hints keep naming `python BUILD.py`
