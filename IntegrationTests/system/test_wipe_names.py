"""Names as well as contents (issue 26, finding 8): an overwrite wipe on ext4 leaves
neither the contents nor the names of what it removed anywhere on the device.

The real daemon wipes, through the real lockwipectl, a vault on a loop-mounted ext4
image whose file and directory names and contents carry markers; the image is then
unmounted and read raw, every byte of it: directory blocks (live and freed), the
journal, free space. Canaries outside the vault (with marker names of their own, the
scan's control) must be unchanged and still found.
"""

import json
import os
import platform
import re
import subprocess

import pytest

from host_helpers import fingerprint, loop_filesystem

NAME = b"LWNAME"  # in every name in the vault
DATA = b"LWDATA"  # in every file's contents in the vault
KEEP = b"LWKEEP"  # in names and contents outside it: must survive, and be found


def kernel_wipes_ext4_names():
    """Linux 5.14 wipes a removed ext4 entry's name in its directory block."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", platform.release()).groups())
    return (major, minor) >= (5, 14)


def build_vault(vault, files=200):
    """`files` files named like patients' results, in the root and in nested
    directories whose names are markers too; then everything synced, so the names are
    in their directory blocks on the disk and not only in the journal (a vault's files
    are usually old)."""
    dirs = [vault, vault / f"{NAME.decode()}-dir-oncology", vault / f"{NAME.decode()}-dir-oncology" / f"{NAME.decode()}-dir-2026"]
    for i in range(8):
        dirs.append(vault / f"{NAME.decode()}-dir-patient-{i:02d}")
    for d in dirs:
        d.mkdir(exist_ok=True)
    for i in range(files):
        d = dirs[i % len(dirs)]
        (d / f"{NAME.decode()}-{i:04d}-smith-hiv-results.pdf").write_bytes((DATA + b"-%04d secret result " % i) * (40 + i))
    return 200 + len(dirs) - 1


def scan(image):
    data = image.read_bytes()
    found = {m: len(re.findall(re.escape(m), data)) for m in (NAME, DATA, KEEP)}
    names = sorted({n.decode() for n in re.findall(NAME + rb"-[0-9a-z-]{3,30}", data)})
    found["distinct names"], found["names"] = len(names), names[:5]
    return found


@pytest.mark.parametrize("features", ["has_journal", "^has_journal"], ids=["journal", "no-journal"])
def test_overwrite_wipe_on_ext4_leaves_no_name_or_content_on_the_device(daemon, make_user, features):
    user = make_user()
    with loop_filesystem(daemon.root, "ext4names", ["mkfs.ext4", "-q", "-F", "-b", "4096", "-O", features], "96M") as fs:
        image = daemon.root / "ext4names.img"
        outside = fs / "outside"
        outside.mkdir()
        (outside / f"{KEEP.decode()}-canary-name.txt").write_bytes(KEEP + b" canary contents " * 100)
        (outside / f"{KEEP.decode()}-hard.txt").write_bytes(KEEP + b" hard-linked contents " * 100)
        vault = fs / "home" / "alice"
        vault.mkdir(parents=True)
        entries = build_vault(vault)
        os.symlink(outside / f"{KEEP.decode()}-canary-name.txt", vault / "escape")
        os.link(outside / f"{KEEP.decode()}-hard.txt", vault / "hard")
        os.sync()
        before = fingerprint(outside)
        daemon.ok("register", "--user", user.name, "--dir", str(vault))

        r = daemon.ok("wipe", "--user", user.name, "--yes")
        assert os.listdir(vault) == []
        assert fingerprint(outside) == before
        report = daemon.registration(user)["wipe"]
        assert report["files_overwritten"] == 200 and report["entries_removed"] == entries + 2, r.describe()
        cert = json.loads(daemon.ok("certificate", "--user", user.name, "--json").out)
        assert cert["result"] == "complete"
        names_caveats = [c for c in cert["caveats"] if c["kind"] == "names"]

        subprocess.run(["umount", str(fs)], check=True)
        found = scan(image)

    # The control: what is outside the vault is on the device, names and contents.
    assert found[KEEP] >= 4, found
    assert found[DATA] == 0, found
    if kernel_wipes_ext4_names():
        # Nowhere: not in the directory blocks (the vault's own, or the freed blocks of
        # its removed directories), not in the journal, not in free space.
        assert found[NAME] == 0, found
        assert names_caveats == [], cert["caveats"]
    else:
        assert len(names_caveats) == 1 and names_caveats[0]["path"] == str(vault), cert["caveats"]


def test_names_left_on_btrfs_are_a_caveat_in_the_dry_run_report_and_certificate(daemon, make_user):
    """btrfs keeps removed names in its metadata trees (new blocks as they change): the
    wipe cannot clear them, and every place that reports the wipe says so, before and
    after; the raw image shows why."""
    from test_certificates import btrfs_fs

    user = make_user()
    with btrfs_fs(daemon) as fs:
        image = daemon.root / "btrfs.img"
        vault = fs / "alice"
        vault.mkdir()
        build_vault(vault, files=40)
        (fs / f"{KEEP.decode()}-canary.txt").write_bytes(KEEP + b" canary " * 100)
        os.sync()
        before = fingerprint(fs / f"{KEEP.decode()}-canary.txt")
        daemon.ok("register", "--user", user.name, "--dir", str(vault))

        dry = daemon.ok("wipe", "--user", user.name, "--dry-run").out
        assert f"{user.name}: {vault}: caveat (names): btrfs keeps the names of removed files" in dry, dry
        r = daemon.ok("wipe", "--user", user.name, "--yes")
        assert os.listdir(vault) == [] and fingerprint(fs / f"{KEEP.decode()}-canary.txt") == before
        assert "caveat (names)" in r.out, r.describe()
        cert = json.loads(daemon.ok("certificate", "--user", user.name, "--json").out)
        names = [c for c in cert["caveats"] if c["kind"] == "names"]
        assert len(names) == 1 and names[0]["path"] == str(vault), cert["caveats"]
        assert "encrypted vault" in names[0]["detail"]
        text = daemon.ok("certificate", "--user", user.name).out
        assert f"  caveat:       names: {vault}: {names[0]['detail']}" in text, text
        assert "names" in daemon.ok("status").out.split("last wipe's caveats:")[1].splitlines()[0]

        subprocess.run(["umount", str(fs)], check=True)
        found = scan(image)
    # What the caveat says (the contents' old blocks are the copy-on-write caveat's).
    assert found[KEEP] >= 2 and found[NAME] > 0, found
