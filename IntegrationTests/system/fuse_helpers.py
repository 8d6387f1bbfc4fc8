"""FUSE filesystems over and inside vaults (issue 26): what a user a lock or wipe is
aimed at can mount, made with Debian's FUSE (the kernel's fuse module, libfuse3 through
python3-pyfuse3) and served by `fuse_passthrough.py`.

`user_fuse_mount` makes exactly the mount `fusermount3` makes for a user (type
`fuse.passthrough`, `user_id=`/`group_id=` of the user, nosuid, nodev, no allow_other:
root is refused by it) and leaves it to a server running as that user. The mount itself
is made by the test (root) on a /dev/fuse descriptor it hands the server, as
fusermount3 does: fusermount3 opens /dev/fuse with the user's rights, and on machines
without udev (this CI's) /dev/fuse is 0600 instead of its usual 0666; the test does not
change the host's device node.

`root_fuse_mount` is a pass-through filesystem root mounts with allow_other: a stand-in
for any filesystem that can stall (an NFS server gone away), stalled by stopping its
server with SIGSTOP.

Every mount is detached and every server ended when the block ends, also on failure.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

from host_helpers import User, as_user_argv, child_env, wait_until

SERVER = Path(__file__).with_name("fuse_passthrough.py")
PYTHON = "/usr/bin/python3"  # Debian's, which has python3-pyfuse3

_libc = ctypes.CDLL(None, use_errno=True)
MS_NOSUID, MS_NODEV = 2, 4
MNT_DETACH = 2


def fuse_unavailable():
    if os.geteuid() != 0:
        return "needs root to mount FUSE filesystems"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no fuse module)"
    try:
        subprocess.run([PYTHON, "-c", "import pyfuse3, trio"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return "python3-pyfuse3 is not installed (scripts/install-deps --for test installs it)"
    return None


def mounts_at(path) -> list[str]:
    """The mountinfo lines of what is mounted at `path` in the test's mount namespace."""
    path = os.fspath(path)
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if line.split(" ")[4] == path]


def detach(path):
    _libc.umount2(os.fsencode(os.fspath(path)), MNT_DETACH)


@contextlib.contextmanager
def user_fuse_mount(user: User, mountpoint, source=None):
    """A pass-through FUSE filesystem that `user` mounted on `mountpoint` (a directory
    she owns), serving `source` (default: the directory it hides, opened before the
    mount). Yields the server's Popen."""
    mountpoint = os.fspath(mountpoint)
    source = os.fspath(source or mountpoint)
    fuse_fd = os.open("/dev/fuse", os.O_RDWR)
    server = None
    try:
        server = subprocess.Popen(
            as_user_argv(user, [PYTHON, SERVER, source, "--fuse-fd", str(fuse_fd)]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=[fuse_fd], env=child_env())
        assert server.stdout.readline().strip() == "opened", "the FUSE server did not open its source"
        mode = os.stat(mountpoint).st_mode & 0o170000
        options = f"fd={fuse_fd},rootmode={mode:o},user_id={user.uid},group_id={user.gid}"
        if _libc.mount(b"passthrough", os.fsencode(mountpoint), b"fuse.passthrough", MS_NOSUID | MS_NODEV, options.encode()) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount FUSE on {mountpoint}: {os.strerror(err)}")
        server.stdin.write("go\n")
        server.stdin.flush()
        os.close(fuse_fd)
        fuse_fd = -1
        yield server
    finally:
        if fuse_fd >= 0:
            os.close(fuse_fd)
        if server is not None and server.poll() is None:
            server.kill()
            server.wait(timeout=10)
        while mounts_at(mountpoint):
            detach(mountpoint)


@contextlib.contextmanager
def root_fuse_mount(mountpoint, source):
    """A pass-through FUSE filesystem root mounted on `mountpoint` with allow_other,
    serving `source`. Yields the server's Popen (SIGSTOP it to stall the filesystem)."""
    mountpoint = os.fspath(mountpoint)
    server = subprocess.Popen(
        [PYTHON, SERVER, os.fspath(source), "--mountpoint", mountpoint, "--allow-other"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert server.stdout.readline().strip() == "mounted", "the FUSE server did not mount"
        yield server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGCONT)
            server.kill()
            server.wait(timeout=10)
        while mounts_at(mountpoint):
            detach(mountpoint)
