"""curation.acquire.archives: hostile members are refused one by one and counted, the good members kept, and
nothing is ever written outside the target; archive-wide limits and damage refuse the archive and leave nothing."""
from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from curation.acquire.archives import ExtractResult, extract
from curation.errors import InputError

GOOD = {"a.txt": b"alpha\n", "sub/b.bin": bytes(range(256)) * 4, "sub/deeper/c.json": b"{}\n"}


def _tree(root: Path) -> set[str]:
    """Every path under root (files, dirs, links), relative, so stray writes show up."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def _tar_member(name: str, data: bytes = b"", type_=tarfile.REGTYPE, linkname: str = "",
                mode: int = 0o600) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = type_
    info.linkname = linkname
    info.mode = mode
    info.size = len(data) if type_ == tarfile.REGTYPE else 0
    return info, (data if type_ == tarfile.REGTYPE else None)


def make_tar(path: Path, members, mode: str = "w:gz") -> Path:
    # TarInfo objects added directly keep hostile names ('/x', '../x') that TarFile.add strips.
    with tarfile.open(path, mode) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def make_zip(path: Path, entries) -> Path:
    """entries: (name, data) or (ZipInfo, data)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


@pytest.fixture
def dirs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    return src, out / "target"


def _assert_refused(archive: Path, target: Path, match: str, **limits) -> InputError:
    root = target.parent.parent
    before = _tree(root)
    with pytest.raises(InputError, match=match) as err:
        extract(archive, target, **limits)
    assert str(archive) in str(err.value)
    assert not target.exists()
    assert _tree(root) == before, "refusal left files behind"
    assert not (root.parent / "evil").exists() and not (root / "evil").exists()
    return err.value


def _assert_members_refused(archive: Path, target: Path, refused: dict, kept: set[str], **limits) -> ExtractResult:
    """The archive extracts; exactly `kept` files are in the target, `refused` counts the rest by reason,
    and nothing appeared outside the target (no `evil` anywhere, the tree around it unchanged)."""
    root = target.parent.parent
    before = _tree(root)
    result = extract(archive, target, **limits)
    assert result.refused == refused
    assert sum(refused.values()) == len(result.refused_members)
    assert set(result.files) == kept
    assert {p for p in _tree(target) if (target / p).is_file() or (target / p).is_symlink()} == kept
    assert not any((target / p).is_symlink() for p in _tree(target))
    assert _tree(root) - {f"out/target/{p}" for p in _tree(target)} - {"out/target"} == before
    assert not (root.parent / "evil").exists() and not (root / "evil").exists()
    return result


# --- good archives ---------------------------------------------------------------------------

@pytest.mark.parametrize("mode,suffix", [("w:gz", "tar.gz"), ("w", "tar"), ("w:bz2", "tar.bz2"),
                                         ("w:xz", "tar.xz")])
def test_good_tar_extracts_files_sha_and_modes(dirs, mode, suffix):
    src, target = dirs
    members = [_tar_member("sub", type_=tarfile.DIRTYPE, mode=0o700)]
    members += [_tar_member(n, d, mode=0o700) for n, d in GOOD.items()]
    archive = make_tar(src / f"good.{suffix}", members, mode)
    result = extract(archive, target)
    assert isinstance(result, ExtractResult)
    assert result.files == sorted(GOOD)
    assert result.bytes == sum(len(d) for d in GOOD.values())
    assert result.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert result.refused == {} and result.refused_members == []
    assert _tree(target) == set(GOOD) | {"sub", "sub/deeper"}
    for name, data in GOOD.items():
        assert (target / name).read_bytes() == data
        assert stat.S_IMODE((target / name).stat().st_mode) == 0o644
    for d in (target, target / "sub", target / "sub/deeper"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o755
    assert os.listdir(target.parent) == ["target"]  # no staging directory left over


def test_good_zip_extracts(dirs):
    src, target = dirs
    archive = make_zip(src / "good.zip", [("sub/", b"")] + list(GOOD.items()))
    result = extract(archive, target)
    assert result.files == sorted(GOOD)
    assert result.bytes == sum(len(d) for d in GOOD.values())
    assert result.sha256 == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert _tree(target) == set(GOOD) | {"sub", "sub/deeper"}
    assert os.listdir(target.parent) == ["target"]  # no staging directory left over
    for name, data in GOOD.items():
        assert (target / name).read_bytes() == data


def test_existing_empty_target_is_filled_nonempty_refused(dirs):
    src, target = dirs
    archive = make_zip(src / "good.zip", list(GOOD.items()))
    target.mkdir()
    assert extract(archive, target).files == sorted(GOOD)
    with pytest.raises(InputError, match="not empty"):
        extract(archive, target)
    assert _tree(target) == set(GOOD) | {"sub", "sub/deeper"}


def test_special_files_refused_with_reason(dirs):
    src, target = dirs
    archive = make_tar(src / "special.tar.gz", [
        _tar_member("ok.txt", b"ok"), _tar_member("fifo", type_=tarfile.FIFOTYPE),
        _tar_member("dev", type_=tarfile.CHRTYPE), _tar_member("blk", type_=tarfile.BLKTYPE)])
    result = _assert_members_refused(archive, target, {"device": 2, "fifo": 1}, {"ok.txt"})
    assert _tree(target) == {"ok.txt"}
    assert [m["member"] for m in result.refused_members] == ["fifo", "dev", "blk"]


# --- path escapes: refused member by member --------------------------------------------------

@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "./../evil"])
def test_tar_traversal_refused_nothing_outside(dirs, name):
    src, target = dirs
    archive = make_tar(src / "trav.tar.gz", [_tar_member("fine.txt", b"x"), _tar_member(name, b"pwn")])
    result = _assert_members_refused(archive, target, {"path_traversal": 1}, {"fine.txt"})
    assert result.refused_members[0]["member"] == name and "'..'" in result.refused_members[0]["detail"]


def test_tar_absolute_path_refused(dirs):
    src, target = dirs
    evil = target.parent.parent / "evil"
    archive = make_tar(src / "abs.tar.gz", [_tar_member(str(evil), b"pwn"), _tar_member("ok", b"ok")])
    _assert_members_refused(archive, target, {"absolute_path": 1}, {"ok"})


@pytest.mark.parametrize("link", ["/etc/passwd", "../../x", "../target2"])
def test_tar_symlink_outside_refused(dirs, link):
    src, target = dirs
    archive = make_tar(src / "sym.tar.gz", [
        _tar_member("escape", type_=tarfile.SYMTYPE, linkname=link),
        _tar_member("escape/passwd", b"pwn")])  # would write through the link if it existed
    result = _assert_members_refused(archive, target, {"link": 1}, {"escape/passwd"})
    assert "outside the target" in result.refused_members[0]["detail"]
    assert (target / "escape").is_dir() and not (target / "escape").is_symlink()   # a plain folder in the target
    assert not (target.parent / "target2").exists()


def test_tar_symlink_inside_refused_too(dirs):
    src, target = dirs
    archive = make_tar(src / "symin.tar.gz", [
        _tar_member("a.txt", b"x"), _tar_member("b.txt", type_=tarfile.SYMTYPE, linkname="a.txt")])
    result = _assert_members_refused(archive, target, {"link": 1}, {"a.txt"})
    assert "links are never extracted" in result.refused_members[0]["detail"]


@pytest.mark.parametrize("link", ["/etc/passwd", "../evil"])
def test_tar_hardlink_outside_refused(dirs, link):
    src, target = dirs
    archive = make_tar(src / "hard.tar.gz", [_tar_member("h", type_=tarfile.LNKTYPE, linkname=link)])
    result = _assert_members_refused(archive, target, {"link": 1}, set())
    assert "hard link to" in result.refused_members[0]["detail"] and "outside the target" in \
        result.refused_members[0]["detail"]


@pytest.mark.parametrize("name,reason", [("../evil", "path_traversal"), ("a/../../evil", "path_traversal"),
                                         ("/tmp/evil", "absolute_path"),
                                         ("..\\evil", "path_traversal"), ("C:/evil", "absolute_path")])
def test_zip_escape_names_refused(dirs, name, reason):
    src, target = dirs
    archive = make_zip(src / "trav.zip", [("fine.txt", b"x"), (name, b"pwn")])
    _assert_members_refused(archive, target, {reason: 1}, {"fine.txt"})


@pytest.mark.parametrize("link", ["/etc/passwd", "../../x"])
def test_zip_symlink_refused(dirs, link):
    src, target = dirs
    info = zipfile.ZipInfo("link")
    info.create_system = 3  # unix, so external_attr carries st_mode
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = make_zip(src / "sym.zip", [(info, link.encode())])
    result = _assert_members_refused(archive, target, {"link": 1}, set())
    assert "outside the target" in result.refused_members[0]["detail"]


def _zip_special(name: str, fmt: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (fmt | 0o644) << 16
    return info


def test_tar_mixing_good_and_hostile_members_keeps_every_good_one(dirs):
    """One archive with each hostile class between good members: the good ones are all extracted, byte for
    byte, each hostile one is counted by its reason and named, nothing escapes."""
    src, target = dirs
    outside = target.parent.parent / "canary.txt"
    outside.write_bytes(b"CANARY outside the target")
    members = [_tar_member("good/1.txt", b"one"), _tar_member("../evil", b"pwn"),
               _tar_member("good/2.txt", b"two"), _tar_member(str(target.parent.parent / "evil"), b"pwn"),
               _tar_member("good/3.txt", b"three"), _tar_member("out", type_=tarfile.SYMTYPE, linkname=str(outside)),
               _tar_member("good/4.txt", b"four"), _tar_member("hl", type_=tarfile.LNKTYPE, linkname="../canary.txt"),
               _tar_member("good/5.txt", b"five"), _tar_member("null", type_=tarfile.CHRTYPE),
               _tar_member("good/6.txt", b"six"), _tar_member("pipe", type_=tarfile.FIFOTYPE),
               _tar_member("good/1.txt/x", b"conflict"), _tar_member("good/7.txt", b"seven")]
    for mode, suffix in (("w", "tar"), ("w:gz", "tar.gz")):
        t = target.with_name(f"target-{suffix}")
        archive = make_tar(src / f"mixed.{suffix}", members, mode)
        before = _tree(target.parent.parent)
        result = extract(archive, t)
        assert result.refused == {"path_traversal": 1, "absolute_path": 1, "link": 2, "device": 1, "fifo": 1,
                                  "conflict": 1}
        assert [m["member"] for m in result.refused_members] == [
            "../evil", members[3][0].name, "out", "hl", "null", "pipe", "good/1.txt/x"]
        assert result.files == [f"good/{i}.txt" for i in range(1, 8)]
        assert [(t / f).read_bytes() for f in result.files] == [b"one", b"two", b"three", b"four", b"five",
                                                                 b"six", b"seven"]
        assert _tree(target.parent.parent) - before == {f"out/{t.name}"} | {f"out/{t.name}/{p}" for p in _tree(t)}
        assert outside.read_bytes() == b"CANARY outside the target"
        assert not any((t / p).is_symlink() for p in _tree(t))


def test_zip_mixing_good_and_hostile_members_keeps_every_good_one(dirs):
    src, target = dirs
    link = zipfile.ZipInfo("link")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    enc = zipfile.ZipInfo("secret.txt")
    entries = [("a.txt", b"a"), ("../evil", b"pwn"), ("b.txt", b"b"), ("/tmp/evil", b"pwn"), ("c.txt", b"c"),
               (link, b"/etc/passwd"), ("d.txt", b"d"), (_zip_special("dev", stat.S_IFCHR), b""), ("e.txt", b"e"),
               (_zip_special("sock", stat.S_IFSOCK), b""), ("f.txt", b"f"), ("x\\y.txt", b"backslash"),
               ("g.txt", b"g")]
    archive = make_zip(src / "mixed.zip", entries + [(enc, b"hidden")])
    # mark the last entry encrypted in both headers: zipfile refuses to write encrypted entries itself
    data = bytearray(archive.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.rfind(sig)
        flag = at + (6 if sig == b"PK\x03\x04" else 8)
        data[flag] |= 1
    archive.write_bytes(bytes(data))
    result = _assert_members_refused(archive, target, {"path_traversal": 1, "absolute_path": 1, "link": 1,
                                                       "device": 1, "socket": 1, "bad_name": 1, "encrypted": 1},
                                     {f"{c}.txt" for c in "abcdefg"})
    assert [(target / f"{c}.txt").read_bytes() for c in "abcdefg"] == [c.encode() for c in "abcdefg"]
    assert result.refused_members[-1] == {"member": "secret.txt", "reason": "encrypted",
                                          "detail": "encrypted; provide an unencrypted archive"}


def test_refused_members_are_counted_past_the_listing_limit(dirs, monkeypatch):
    from curation.acquire import members
    monkeypatch.setattr(members, "LISTED", 3)
    src, target = dirs
    archive = make_tar(src / "many.tar", [_tar_member(f"../e{i}", b"x") for i in range(5)] +
                       [_tar_member("ok", b"ok")], "w")
    result = extract(archive, target)
    assert result.refused == {"path_traversal": 5} and len(result.refused_members) == 3 and result.files == ["ok"]


# --- resource limits -------------------------------------------------------------------------

ZEROS = 50 * 2**20


def test_zip_bomb_refused_no_partial(dirs):
    src, target = dirs
    archive = make_zip(src / "bomb.zip", [("first.txt", b"fine"), ("zeros.bin", bytes(ZEROS))])
    assert archive.stat().st_size * 200 < ZEROS  # really a bomb at the default ratio
    _assert_refused(archive, target, "max_ratio")


def test_gzip_bomb_refused_no_partial(dirs):
    src, target = dirs
    archive = make_tar(src / "bomb.tar.gz", [_tar_member("first.txt", b"fine"),
                                             _tar_member("zeros.bin", bytes(ZEROS))])
    _assert_refused(archive, target, "max_ratio")


def test_total_and_member_byte_limits(dirs):
    src, target = dirs
    archive = make_zip(src / "big.zip", [(f"f{i}", os.urandom(4096)) for i in range(4)] + [("small", b"s")])
    _assert_refused(archive, target, "max_total_bytes", max_total_bytes=10_000)
    # one member over max_member_bytes is refused alone: the others are kept
    result = _assert_members_refused(archive, target, {"too_large": 4}, {"small"}, max_member_bytes=4095)
    assert "max_member_bytes=4095" in result.refused_members[0]["detail"]
    shutil.rmtree(target)
    assert extract(archive, target, max_total_bytes=16385, max_member_bytes=4096).bytes == 16385


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_limits_enforced_on_bytes_written_not_headers(dirs, monkeypatch, kind):
    # Make every header claim 0 bytes: only the streaming count can catch the members.
    from curation.acquire import archives
    real = archives._Writer.write_file
    monkeypatch.setattr(archives._Writer, "write_file",
                        lambda self, rel, name, declared, read: real(self, rel, name, 0, read))
    src, target = dirs
    data = {"a": os.urandom(4096), "zeros": bytes(4 * 2**20)}
    if kind == "zip":
        archive = make_zip(src / "liar.zip", list(data.items()))
    else:
        archive = make_tar(src / "liar.tar.gz", [_tar_member(n, d) for n, d in data.items()])
    # streamed past max_member_bytes: the member's partial file is removed, the other kept
    _assert_members_refused(archive, target, {"too_large": 2}, set(), max_member_bytes=4095)
    shutil.rmtree(target)
    _assert_members_refused(archive, target, {"too_large": 1}, {"a"}, max_member_bytes=2**19)
    shutil.rmtree(target)
    _assert_refused(archive, target, "max_total_bytes", max_total_bytes=2**20)
    _assert_refused(archive, target, "max_ratio", max_ratio=50)


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_member_count_limit(dirs, kind):
    src, target = dirs
    names = [f"f{i:03d}" for i in range(11)]
    if kind == "zip":
        archive = make_zip(src / "many.zip", [(n, b"x") for n in names])
    else:
        archive = make_tar(src / "many.tar.gz", [_tar_member(n, b"x") for n in names])
    _assert_refused(archive, target, "max_members=10", max_members=10)
    assert len(extract(archive, target, max_members=11).files) == 11


# --- damaged archives ------------------------------------------------------------------------

@pytest.mark.parametrize("suffix,mode", [("tar.gz", "w:gz"), ("tar", "w"), ("tar.xz", "w:xz")])
def test_truncated_tar_refused(dirs, suffix, mode):
    src, target = dirs
    good = make_tar(src / f"good.{suffix}", [_tar_member("r.bin", os.urandom(20_000))], mode)
    data = good.read_bytes()
    # Cut mid-stream, and (for plain tar) exactly after the member's data: a block boundary.
    cuts = [len(data) // 2] + ([512 + 20_480] if mode == "w" else [])
    for i, cut in enumerate(cuts):
        bad = src / f"bad{i}.{suffix}"
        bad.write_bytes(data[:cut])
        err = _assert_refused(bad, target, "truncated or corrupt archive")
        assert bad.name in str(err) and "re-download" in str(err)


def test_truncated_and_garbage_zip_refused(dirs):
    src, target = dirs
    good = make_zip(src / "good.zip", [("r.bin", os.urandom(20_000))])
    bad = src / "bad.zip"
    bad.write_bytes(good.read_bytes()[:10_000])
    _assert_refused(bad, target, "truncated or corrupt archive")
    junk = src / "junk.zip"
    junk.write_bytes(b"not an archive at all")
    _assert_refused(junk, target, "truncated or corrupt archive")


def test_missing_archive_refused(dirs):
    src, target = dirs
    with pytest.raises(InputError, match="not found"):
        extract(src / "nope.tar.gz", target)


def test_member_names_that_are_not_utf8_are_refused(dirs):
    src, target = dirs
    archive = src / "names.tar"
    with tarfile.open(archive, "w", format=tarfile.GNU_FORMAT, encoding="latin-1") as tf:
        for name in ("café.txt", "ok.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tf.addfile(info, io.BytesIO(b"ok"))
    result = _assert_members_refused(archive, target, {"bad_name": 1}, {"ok.txt"})
    assert "not UTF-8" in result.refused_members[0]["detail"]
