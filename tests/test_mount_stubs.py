"""A command layer loses the mount points the engine left under /opt/enginebuild (a step's files
and script are mounted there, never copied), and keeps anything else there: a file with bytes,
a whiteout, and the folders above them."""
import io
import tarfile

from enginebuild.execution.normalize import normalize_layer
from enginebuild.io.tars import TarWriter


def _layer(path, entries):
    with tarfile.open(path, "w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _names(raw):
    sink = io.BytesIO()
    writer = TarWriter(sink, mtime=0)
    normalized = normalize_layer(raw, writer)
    writer.close()
    sink.seek(0)
    with tarfile.open(fileobj=sink) as tar:
        return [m.name for m in tar], normalized.dropped


def test_the_mount_points_of_a_step_are_dropped_and_what_it_wrote_there_is_kept(tmp_path):
    raw = _layer(tmp_path / "step.tar", [
        ("opt", None), ("opt/enginebuild", None), ("opt/enginebuild/step", None),
        ("opt/enginebuild/step/rewrite.sh", b""), ("opt/enginebuild/step-script.sh", b""),
        ("opt/engine", None), ("opt/engine/model_runner.py", b"x = 1\n")])
    names, dropped = _names(raw)
    assert names == ["opt", "opt/engine", "opt/engine/model_runner.py"]
    assert {"opt/enginebuild", "opt/enginebuild/step", "opt/enginebuild/step/rewrite.sh"} <= set(dropped)

    raw = _layer(tmp_path / "kept.tar", [
        ("opt/enginebuild", None), ("opt/enginebuild/step", None), ("opt/enginebuild/step/empty.sh", b""),
        ("opt/enginebuild/notes.txt", b"written by the step\n"), ("opt/enginebuild/old/.wh.gone", b"")])
    names, _ = _names(raw)
    assert names == ["opt/enginebuild", "opt/enginebuild/notes.txt", "opt/enginebuild/old/.wh.gone"]
