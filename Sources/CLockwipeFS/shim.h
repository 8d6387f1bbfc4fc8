#ifndef LOCKWIPE_FS_SHIM_H
#define LOCKWIPE_FS_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <unistd.h>

/// The mount id of `name` relative to `dirfd` (not following a final symlink), so a walk
/// can refuse to enter any mount point, including bind mounts of the same filesystem,
/// which `st_dev` alone cannot tell apart. Returns 0, or -errno (-ENOTSUP when the kernel
/// does not report mount ids).
static inline int lockwipe_mount_id(int dirfd, const char *name, uint64_t *mount_id) {
    struct statx sx;
    int flags = AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | (name[0] == '\0' ? AT_EMPTY_PATH : 0);
    if (statx(dirfd, name, flags, STATX_MNT_ID, &sx) != 0) {
        return -errno;
    }
    if (!(sx.stx_mask & STATX_MNT_ID)) {
        return -ENOTSUP;
    }
    *mount_id = sx.stx_mnt_id;
    return 0;
}

/// The inode flags (`chattr` attributes) of an open file or directory: 0, or -errno.
/// `ioctl` is variadic, which Swift cannot call.
static inline int lockwipe_get_inode_flags(int fd, unsigned int *flags) {
    int value = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &value) != 0) {
        return -errno;
    }
    *flags = (unsigned int)value;
    return 0;
}

/// Clears the immutable and append-only attributes of an open file or directory (needs
/// CAP_LINUX_IMMUTABLE). Returns the flags that were cleared (0 when none were set), or
/// -errno.
static inline int lockwipe_clear_immutable(int fd) {
    int value = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &value) != 0) {
        return -errno;
    }
    int set = value & (FS_IMMUTABLE_FL | FS_APPEND_FL);
    if (set == 0) {
        return 0;
    }
    value &= ~(FS_IMMUTABLE_FL | FS_APPEND_FL);
    if (ioctl(fd, FS_IOC_SETFLAGS, &value) != 0) {
        return -errno;
    }
    return set;
}

/// `syncfs(2)`: writes back every dirty page and inode of the filesystem holding `fd`.
/// One call makes a whole batch of overwritten files durable. 0, or -errno.
static inline int lockwipe_syncfs(int fd) {
    return syncfs(fd) == 0 ? 0 : -errno;
}

/// Starts writeback of a file's dirty pages without waiting for it, so the disk works
/// on one file while the next is being written; the batch's `syncfs` then waits for all.
static inline void lockwipe_start_writeback(int fd) {
    (void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

static const unsigned int lockwipe_immutable_flag = FS_IMMUTABLE_FL;
static const unsigned int lockwipe_append_flag = FS_APPEND_FL;

#endif
