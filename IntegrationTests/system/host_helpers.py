"""Helpers about the machine the system tests run on, not about lockwipe: throwaway
Unix users and commands run as them, processes a test started (ended at teardown),
file trees (filling a vault, fingerprints, owners and modes, removing a test's
temporary directory whatever it holds) and polling.

Plain functions and classes; the fixtures that use them are in conftest.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import signal
import stat
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAY = 86400

CHILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# --------------------------------------------------------------------------- polling and time


def wait_until(predicate, timeout, what, interval=0.1, details=None):
    """Poll `predicate` until it returns a truthy value; fail with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            extra = ""
            if details is not None:
                extra = "\n" + (details() if callable(details) else str(details))
            pytest.fail(f"{what} (waited {timeout:g} s){extra}")
        time.sleep(interval)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --------------------------------------------------------------------------- users


class User:
    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.name = name
        self.uid = pw.pw_uid
        self.gid = pw.pw_gid

    def __repr__(self):
        return f"User({self.name}, uid={self.uid})"


NOBODY = None  # filled lazily


def nobody() -> User:
    global NOBODY
    if NOBODY is None:
        NOBODY = User("nobody")
    return NOBODY


def as_user_argv(user: User | None, argv):
    """argv that runs `argv` as `user` (no PAM, supplementary groups from the group
    database, all capabilities dropped by the uid change)."""
    argv = [os.fspath(a) for a in argv]
    if user is None:
        return argv
    return [
        "setpriv",
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--init-groups",
        "--",
    ] + argv


def child_env(extra=None):
    env = {"PATH": CHILD_PATH, "LANG": "C.UTF-8", "HOME": "/"}
    if extra:
        env.update(extra)
    return env


def run_as(user, argv, input=None, timeout=30, env=None):
    """Run argv (optionally as another user); return CompletedProcess (text)."""
    full = as_user_argv(user, argv)
    return subprocess.run(
        full,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(env),
    )


def can_list(user: User, path) -> bool:
    return run_as(user, ["ls", "-A", path]).returncode == 0


# --------------------------------------------------------------------------- processes


class Processes:
    """Processes a test started (user processes, hooks it knows of); all ended at
    teardown, by pid, only if they are still the process that was started."""

    def __init__(self):
        self.popens: list[subprocess.Popen] = []
        self.pids: list[tuple[int, bytes]] = []

    def spawn(self, user, argv, **kw):
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("env", child_env())
        p = subprocess.Popen(as_user_argv(user, argv), **kw)
        self.popens.append(p)
        return p

    def adopt_pid(self, pid: int):
        """Remember a process the test did not spawn itself (e.g. a hook); it is
        killed at teardown if its command line is still the same."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            return
        self.pids.append((pid, cmdline))

    def cleanup(self):
        for p in self.popens:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            for s in (p.stdout, p.stderr):
                if s:
                    s.close()
        for pid, cmdline in self.pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if f.read() != cmdline:
                        continue
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def processes_of(uid, state=None):
    """Pids of `uid`'s processes (any of the four uids of their `Uid:` line) that are not
    zombies, or only those whose state letter is `state` ("D": an uninterruptible wait)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        letter = fields.get("State", "").strip()[:1]
        if letter in ("Z", "X") or (state is not None and letter != state):
            continue
        if str(uid) in fields.get("Uid", "").split():
            found.append(int(name))
    return found


# --------------------------------------------------------------------------- file trees


def mode_of(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def owner_of(path) -> tuple[int, int, int]:
    st = os.lstat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def fill_vault(user, d: Path, files=None):
    """Writes `files` (relative path -> bytes; default: two small files, one in a
    subdirectory) into the directory `d` and gives everything inside it to `user`."""
    files = {"notes.txt": b"field notes\n", "sub/report.csv": b"a,b\n1,2\n"} if files is None else files
    for rel, content in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)
    for dirpath, dirnames, filenames in os.walk(d):
        for n in dirnames + filenames:
            os.lchown(os.path.join(dirpath, n), user.uid, user.gid)


def fmt_owner(t) -> str:
    """(uid, gid, mode) as `uid:gid mode 0755`."""
    return f"{t[0]}:{t[1]} mode {t[2]:04o}"


def sha256_of(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fingerprint(path) -> dict:
    """Everything a wipe or lock must not change about `path` and what is below it:
    type, owner, mode, content hash (files), target (symlinks), never following links."""
    path = os.fspath(path)
    result = {}

    def one(p, rel):
        st = os.lstat(p)
        entry = {"uid": st.st_uid, "gid": st.st_gid, "mode": stat.S_IMODE(st.st_mode)}
        if stat.S_ISLNK(st.st_mode):
            entry["type"] = "symlink"
            entry["target"] = os.readlink(p)
        elif stat.S_ISDIR(st.st_mode):
            entry["type"] = "dir"
            entry["entries"] = sorted(os.listdir(p))
        elif stat.S_ISREG(st.st_mode):
            entry["type"] = "file"
            entry["size"] = st.st_size
            entry["sha256"] = sha256_of(p)
        else:
            entry["type"] = "other"
        result[rel] = entry

    one(path, ".")
    if os.path.isdir(path) and not os.path.islink(path):
        for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                one(full, os.path.relpath(full, path))
    return result


def empty_or_absent(path) -> bool:
    return not os.path.lexists(path) or (
        os.path.isdir(path) and not os.path.islink(path) and os.listdir(path) == []
    )


def mounts_under(root) -> list[str]:
    """Mount points at or below `root`, deepest first (from /proc/self/mountinfo)."""
    root = os.path.realpath(root)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_tree(root):
    """Removes a test's temporary directory, whatever a failed test left in it:
    mounts (unmounted first, so nothing on them is touched), immutable or append-only
    attributes, and trees deeper than Python's recursion limit (rm handles those)."""
    if not os.path.lexists(root):
        return
    for point in mounts_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["chattr", "-R", "-f", "-i", "-a", str(root)], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(root)], capture_output=True)


@contextlib.contextmanager
def loop_filesystem(root, name, mkfs, size="256M"):
    """A file system made by `mkfs` (argv without the image) in <root>/<name>.img and
    loop-mounted at <root>/<name> (mode 0755). Unmounted and removed afterwards, also
    when the test fails: processes still using it are killed first. Skips the test when
    the image cannot be mounted here."""
    import pytest

    image = Path(root) / f"{name}.img"
    mnt = Path(root) / name
    mnt.mkdir()
    subprocess.run(["truncate", "-s", size, str(image)], check=True)
    r = subprocess.run([*mkfs, str(image)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"{' '.join(mkfs)} failed: {r.stderr}")
    r = subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot loop-mount a {mkfs[0]} image here: {r.stderr.strip()}")
    try:
        os.chmod(mnt, 0o755)
        yield mnt
    finally:
        if os.path.ismount(mnt):  # the test may have unmounted it (to read the image)
            subprocess.run(["fuser", "-k", "-m", str(mnt)], capture_output=True)
            for _ in range(50):
                if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
            else:
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        image.unlink(missing_ok=True)
