"""A small pass-through FUSE filesystem on Debian's libfuse3 (python3-pyfuse3), for the
tests of a user who mounts over her own vault (issue 26).

    fuse_passthrough.py SOURCE (--fuse-fd N | --mountpoint DIR [--allow-other])

SOURCE is opened first (before anything is mounted), so the server keeps serving the
directory that its mount then hides, as an attacker's server would. With --fuse-fd the
mount was already made by the caller on the /dev/fuse descriptor N (the way fusermount3
hands one to a user's server): the server prints "opened", waits for a line on stdin,
then serves N (libfuse's /dev/fd/N mount point). With --mountpoint it mounts DIR itself
(root) and prints "mounted". Every answer is fresh (no attribute or entry caching), so
each call of a client reaches this process: stopping it (SIGSTOP) stalls them all.
"""

import argparse
import errno
import os
import sys

import pyfuse3
import trio


class Passthrough(pyfuse3.Operations):
    def __init__(self, source_fd):
        super().__init__()
        self.root = f"/proc/self/fd/{source_fd}"
        self.paths = {pyfuse3.ROOT_INODE: self.root}

    def _path(self, inode):
        try:
            return self.paths[inode]
        except KeyError:
            raise pyfuse3.FUSEError(errno.ENOENT)

    def _attr(self, path):
        try:
            st = os.stat(path) if path == self.root else os.lstat(path)
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno)
        a = pyfuse3.EntryAttributes()
        a.st_ino = pyfuse3.ROOT_INODE if path == self.root else st.st_ino
        for field in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_rdev", "st_size", "st_blksize", "st_blocks"):
            setattr(a, field, getattr(st, field))
        a.st_atime_ns, a.st_mtime_ns, a.st_ctime_ns = st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns
        a.entry_timeout = 0
        a.attr_timeout = 0
        if path != self.root:
            self.paths[a.st_ino] = path
        return a

    async def lookup(self, parent, name, ctx=None):
        return self._attr(os.path.join(self._path(parent), os.fsdecode(name)))

    async def getattr(self, inode, ctx=None):
        return self._attr(self._path(inode))

    async def opendir(self, inode, ctx):
        return inode

    async def readdir(self, fh, start, token):
        path = self._path(fh)
        try:
            names = sorted(os.listdir(path))
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno)
        for i, name in enumerate(names[start:], start):
            attr = self._attr(os.path.join(path, name))
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attr, i + 1):
                break

    async def releasedir(self, fh):
        pass

    async def open(self, inode, flags, ctx):
        try:
            return pyfuse3.FileInfo(fh=os.open(self._path(inode), flags & ~os.O_CREAT))
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno)

    async def create(self, parent, name, mode, flags, ctx):
        path = os.path.join(self._path(parent), os.fsdecode(name))
        try:
            fd = os.open(path, flags | os.O_CREAT, mode)
        except OSError as e:
            raise pyfuse3.FUSEError(e.errno)
        return pyfuse3.FileInfo(fh=fd), self._attr(path)

    async def read(self, fh, offset, size):
        return os.pread(fh, size, offset)

    async def write(self, fh, offset, data):
        return os.pwrite(fh, data, offset)

    async def release(self, fh):
        os.close(fh)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source")
    parser.add_argument("--fuse-fd", type=int)
    parser.add_argument("--mountpoint")
    parser.add_argument("--allow-other", action="store_true")
    args = parser.parse_args()
    source_fd = os.open(args.source, os.O_RDONLY | os.O_DIRECTORY)
    options = set(pyfuse3.default_options)
    options.discard("default_permissions")
    options.add("fsname=passthrough")
    if args.allow_other:
        options.add("allow_other")
    if args.fuse_fd is not None:
        print("opened", flush=True)
        sys.stdin.readline()
        mountpoint = f"/dev/fd/{args.fuse_fd}"
    else:
        mountpoint = args.mountpoint
    pyfuse3.init(Passthrough(source_fd), mountpoint, options)
    if args.fuse_fd is None:
        print("mounted", flush=True)
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=args.fuse_fd is None)


if __name__ == "__main__":
    main()
