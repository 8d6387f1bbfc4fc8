"""Faults the daemon must survive without losing anything: a full state filesystem,
a damaged or missing state database, crashes in the middle of actions."""

import os
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from daemon_harness import config_text
from host_helpers import owner_of, wait_until


@pytest.fixture
def small_state_fs(make_daemon):
    """A daemon whose state directory is a 2 MiB tmpfs (unmounted at the end)."""
    d = make_daemon(start=False)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "lwt-state", str(d.state_dir)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        d.start()
        yield d
    finally:
        d.stop(check=False)
        subprocess.run(["umount", "-l", str(d.state_dir)], capture_output=True)


def fill(directory) -> str:
    """Fills the filesystem of `directory`; returns the filler's path."""
    filler = os.path.join(directory, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass  # ENOSPC: full
    finally:
        os.close(fd)
    return filler


def test_full_state_filesystem_gives_clear_errors_and_recovers(small_state_fs, make_user):
    d = small_state_fs
    first = make_user()
    d.ok("register", "--user", first.name, "--dir", d.make_vault(first, "first"))
    second = make_user()
    second_vault = d.make_vault(second, "second")
    filler = fill(d.state_dir)

    r = d.ctl("register", "--user", second.name, "--dir", second_vault)
    assert r.code == 1, "registration on a full state filesystem: " + r.describe()
    assert "full" in r.text.lower(), "the error does not say the disk is full: " + r.describe()
    r = d.ctl("lock", "--user", first.name)
    assert r.code == 1, "a lock that cannot be recorded must not be reported done: " + r.describe()
    assert "full" in r.text.lower(), r.describe()
    assert owner_of(first_vault := d.data / "first")[0] == first.uid, \
        "the vault was locked although its lock record could not be written (unlock would lose its owner)"
    assert d.running()
    status = d.status()  # still answers
    assert [x["user"] for x in status["registrations"]] == [first.name]

    os.unlink(filler)
    d.ok("register", "--user", second.name, "--dir", second_vault)
    d.ok("lock", "--user", first.name)
    assert owner_of(first_vault) == (0, 0, 0)
    d.ok("unlock", "--user", first.name)
    assert owner_of(first_vault)[0] == first.uid
    d.restart()
    assert {x["user"]: x["state"] for x in d.status()["registrations"]} == {
        first.name: "active", second.name: "active"}
    d.stop()
    db = sqlite3.connect(f"file:{d.state_dir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


def state_damaged_id():
    """MessageID.stateDamaged, read from the source so the two cannot drift apart."""
    text = (Path(__file__).parents[2] / "Sources/LockwipeCore/MessageID.swift").read_text()
    return re.search(r'case stateDamaged = "([0-9a-f]{32})"', text).group(1)


def registered_and_locked(d, make_user):
    """One locked and one active registration, and a copy of the database."""
    locked, active = make_user(), make_user()
    d.ok("register", "--user", locked.name, "--dir", d.make_vault(locked, "locked"))
    d.ok("register", "--user", active.name, "--dir", d.make_vault(active, "active"))
    d.ok("lock", "--user", locked.name)
    return locked, active


def assert_degraded(d, what, locked, active):
    r = d.ctl("status")
    assert r.code == 1, f"status with {what}: " + r.describe()
    assert what in r.text, f"status does not say the database is {what}: " + r.describe()
    r = d.ctl("lock", "--user", active.name)
    assert r.code == 1, f"a lock was carried out blindly with {what}: " + r.describe()
    assert owner_of(d.data / "active")[0] == active.uid, "the active vault was touched"
    assert owner_of(d.data / "locked") == (0, 0, 0), "the locked vault was opened"
    assert d.log_lines(f"MESSAGE_ID={state_damaged_id()}"), \
        "the damage was not logged with its MESSAGE_ID\n" + d.log_tail()
    assert d.running()


def backup(d):
    d.stop()
    saved = d.root / "backup.sqlite"
    src = sqlite3.connect(str(d.state_dir / "state.sqlite"))
    dst = sqlite3.connect(str(saved))
    src.backup(dst)
    src.close()
    dst.close()
    return saved


def restore(d, saved):
    for suffix in ("", "-wal", "-shm"):
        p = d.state_dir / f"state.sqlite{suffix}"
        if p.exists():
            p.unlink()
    (d.state_dir / "state.sqlite").write_bytes(saved.read_bytes())
    os.chmod(d.state_dir / "state.sqlite", 0o600)


def test_missing_database_is_never_replaced_by_an_empty_one(make_daemon, make_user):
    d = make_daemon(config=config_text(lock=2, wipe=5), faketime="+0")
    locked, active = registered_and_locked(d, make_user)
    saved = backup(d)
    for suffix in ("", "-wal", "-shm"):
        p = d.state_dir / f"state.sqlite{suffix}"
        if p.exists():
            p.unlink()
    # Days later, past both thresholds: nothing may happen blindly.
    d.start(faketime="+6d", wait=False)
    wait_until(lambda: d.ctl("status").code in (0, 1) and d.socket.exists(), 15,
               "the daemon did not come up with a missing database", details=d.log_tail)
    assert_degraded(d, "missing", locked, active)
    assert not (d.state_dir / "state.sqlite").exists() or \
        sqlite3.connect(str(d.state_dir / "state.sqlite")).execute(
            "SELECT count(*) FROM sqlite_master").fetchone()[0] == 0, \
        "an empty database was created in place of the missing one"
    d.stop()
    restore(d, saved)
    d.start(faketime="+0")
    states = {x["user"]: x["state"] for x in d.status()["registrations"]}
    assert states == {locked.name: "locked", active.name: "active"}, states


def test_corrupt_database_is_reported_and_nothing_enforced(make_daemon, make_user):
    d = make_daemon()
    locked, active = registered_and_locked(d, make_user)
    saved = backup(d)
    db = d.state_dir / "state.sqlite"
    data = bytearray(db.read_bytes())
    data[0:100] = b"\xa5" * 100  # the header: not a database any more
    db.write_bytes(bytes(data))
    d.start(wait=False)
    wait_until(lambda: d.socket.exists() and d.ctl("status").code == 1, 15,
               "the daemon did not answer status with a corrupt database", details=d.log_tail)
    assert_degraded(d, "damaged", locked, active)
    d.stop()
    restore(d, saved)
    d.start()
    assert {x["user"] for x in d.status()["registrations"]} == {locked.name, active.name}


def test_database_deleted_while_running_stops_enforcement(make_daemon, make_user):
    d = make_daemon()
    locked, active = registered_and_locked(d, make_user)
    for suffix in ("", "-wal", "-shm"):
        p = d.state_dir / f"state.sqlite{suffix}"
        if p.exists():
            p.unlink()
    r = d.ctl("status")
    assert r.code == 1 and "deleted or replaced" in r.text, r.describe()
    assert_degraded(d, "deleted or replaced", locked, active)
    d.stop()
    d.start(wait=False)
    wait_until(lambda: d.socket.exists() and d.ctl("status").code == 1, 15,
               "the daemon did not come up after its database was deleted", details=d.log_tail)
    assert "missing" in d.ctl("status").text
