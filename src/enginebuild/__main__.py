from enginebuild.cli import console

console()
