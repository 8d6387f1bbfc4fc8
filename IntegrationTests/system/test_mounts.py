"""The user a lock or wipe is aimed at mounts over her own vault (issue 26, findings 1
and 2), with real FUSE filesystems (fuse_helpers.py, fuse_passthrough.py):

- a pass-through FUSE filesystem she mounted on her vault, or on a directory inside it:
  root may not enter it, so before this lockwiped's lock ended "LOCK FAILED ...
  Permission denied" and its wipe "INCOMPLETE" with her files left, while she kept
  reading and writing them. Now the lock and the wipe take the vault back (detach the
  mount, end her processes, her server among them) and say so in the journal;
- a vault whose filesystem stops answering (its FUSE server stopped with SIGSTOP, as an
  NFS server that went away): before this, her own `lockwipectl lock` blocked the whole
  daemon. Now the call waits on a thread of its own with a deadline, root's status and
  another user's lock answer at once, her lock fails saying so, and SIGTERM stops the
  daemon.

Canary files outside the vaults (beside a symlink and a hard link into them) stay
byte-identical in every test.
"""

import os
import re
import stat
import subprocess
import time

import pytest

from daemon_harness import config_text
from fuse_helpers import fuse_unavailable, mounts_at, root_fuse_mount, user_fuse_mount
from host_helpers import as_user_argv, child_env, fingerprint, run_as


VAULT_UNRESPONSIVE = "37d502997d734cffb215f7ecb262366c"
MOUNT_DETACHED = "aa93b7810de84f93b215f503fa022762"


@pytest.fixture(autouse=True)
def _needs_fuse():
    why = fuse_unavailable()
    if why:
        pytest.skip(why)


def canaries(daemon, vault):
    """Files outside the vault, and links inside it that lead to them."""
    out = daemon.outside
    (out / "canary.txt").write_bytes(os.urandom(5000))
    (out / "hard.txt").write_bytes(b"shared inode, must survive\n" * 100)
    os.link(out / "hard.txt", vault / "hard-link")
    (vault / "to-canary").symlink_to(out / "canary.txt")
    (vault / "to-outside").symlink_to(out)
    for p in (vault / "hard-link", vault / "to-canary", vault / "to-outside"):
        os.lchown(p, os.stat(vault).st_uid, os.stat(vault).st_gid)
    return fingerprint(out)


def test_a_fuse_mount_over_her_vault_is_taken_back_by_the_lock(daemon, make_user):
    alice = make_user()
    vault = daemon.make_vault(alice, "alice", {"notes.txt": b"field notes\n", "sub/report.csv": b"a,b\n"})
    before = canaries(daemon, vault)
    daemon.ok("register", "--user", alice.name, "--dir", str(vault))
    with user_fuse_mount(alice, vault) as server:
        # The attack works as the issue says: she reads and writes through it, root may not enter.
        assert run_as(alice, ["cat", f"{vault}/notes.txt"]).stdout == "field notes\n"
        with pytest.raises(PermissionError):
            os.listdir(vault)

        r = daemon.ctl("lock", "--user", alice.name)
        assert r.code == 0 and "FAILED" not in r.text, r.describe()
        assert server.wait(timeout=10) is not None, "her FUSE server was not ended"
        assert mounts_at(vault) == [], "the mount is still over the vault"
        st = os.stat(vault)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0), "the vault underneath is not locked"
        for argv in (["ls", str(vault)], ["cat", f"{vault}/notes.txt"], ["touch", f"{vault}/new"]):
            assert run_as(alice, argv).returncode != 0, f"{argv} worked after the lock"
        assert daemon.state_of(alice) == "locked"
        line = daemon.wait_log(lambda l: f"MESSAGE_ID={MOUNT_DETACHED}" in l, 5, "the detach in the journal")
        assert f"LOCKWIPE_MOUNT_OWNER_UID={alice.uid}" in line[-1] and "LOCKWIPE_MOUNT_FSTYPE=fuse.passthrough" in line[-1], line

    daemon.ok("unlock", "--user", alice.name)
    assert run_as(alice, ["cat", f"{vault}/notes.txt"]).stdout == "field notes\n"
    assert fingerprint(daemon.outside) == before


def test_a_fuse_mount_inside_her_vault_is_taken_back_by_the_wipe(daemon, make_user):
    alice = make_user()
    files = {"top.txt": os.urandom(3000), "inner/below.bin": os.urandom(70_000), "inner/deeper/x.txt": b"x\n"}
    vault = daemon.make_vault(alice, "alice", files)
    before = canaries(daemon, vault)
    daemon.ok("register", "--user", alice.name, "--dir", str(vault))
    with user_fuse_mount(alice, vault / "inner") as server:
        assert run_as(alice, ["cat", f"{vault}/inner/deeper/x.txt"]).stdout == "x\n"
        r = daemon.ctl("wipe", "--user", alice.name, "--yes")
        assert r.code == 0 and "INCOMPLETE" not in r.text, r.describe()
        assert server.wait(timeout=10) is not None, "her FUSE server was not ended"
    assert os.listdir(vault) == [], f"left in the vault: {os.listdir(vault)}"
    assert daemon.state_of(alice) == "wiped"
    assert fingerprint(daemon.outside) == before


def test_a_stalled_vault_filesystem_stalls_nobody_else_and_sigterm_stops_the_daemon(make_daemon, make_user):
    daemon = make_daemon(config_text(grace=1))
    alice, bob = make_user(), make_user()
    # Alice's vault lies on a filesystem whose server will stop answering.
    source = daemon.root / "fuse-source"
    source.mkdir(mode=0o755)
    (source / "alice").mkdir()
    (source / "alice" / "notes.txt").write_text("alice's\n")
    for p in (source / "alice", source / "alice" / "notes.txt"):
        os.chown(p, alice.uid, alice.gid)
    os.chmod(source / "alice", 0o700)
    remote = daemon.data / "remote"
    remote.mkdir(mode=0o755)
    bob_vault = daemon.make_vault(bob, "bob")
    before = canaries(daemon, bob_vault)
    with root_fuse_mount(remote, source) as server:
        daemon.ok("register", "--user", alice.name, "--dir", str(remote / "alice"))
        daemon.ok("register", "--user", bob.name, "--dir", str(bob_vault))

        os.kill(server.pid, 19)  # SIGSTOP: every call into the filesystem now waits
        started = time.monotonic()
        her_lock = subprocess.Popen(
            as_user_argv(alice, [daemon.bins.ctl_for_others, "--socket", daemon.socket, "lock", "--user", alice.name]),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        time.sleep(0.5)
        assert her_lock.poll() is None, "the stalled lock returned at once: the filesystem did not stall"

        t = time.monotonic()
        assert daemon.ctl("status", timeout=2).code == 0
        r = daemon.ctl("lock", "--user", bob.name, timeout=2)
        assert r.code == 0, r.describe()
        assert time.monotonic() - t < 2, "root's status and bob's lock waited for alice's stalled vault"
        assert daemon.state_of(bob) == "locked"

        out, err = her_lock.communicate(timeout=30)
        assert her_lock.returncode != 0 and "answer" in err, (out, err)
        assert time.monotonic() - started < 20
        reg = daemon.registration(alice)
        assert reg["state"] == "lock-failed" and "answer" in (reg.get("vault_error") or ""), reg
        assert daemon.log_lines(f"MESSAGE_ID={VAULT_UNRESPONSIVE}", f"LOCKWIPE_USER={alice.name}"), daemon.log_tail()
        # While it stalls, another action on her vault fails at once.
        t = time.monotonic()
        again = daemon.ctl("lock", "--user", alice.name, timeout=5)
        assert again.code != 0 and time.monotonic() - t < 3, again.describe()

        # SIGTERM stops the daemon although a thread of it still waits on the filesystem.
        t = time.monotonic()
        assert daemon.stop() == 0
        assert time.monotonic() - t < 5
        server.send_signal(18)  # SIGCONT
    assert fingerprint(daemon.outside) == before
