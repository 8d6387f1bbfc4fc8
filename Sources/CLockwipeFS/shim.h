#ifndef LOCKWIPE_FS_SHIM_H
#define LOCKWIPE_FS_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

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

#endif
