#ifndef LOCKWIPE_FS_MEDIA_H
#define LOCKWIPE_FS_MEDIA_H

// What a vault is stored on, read through descriptors the wipe already holds: the file
// system's UUID, btrfs subvolumes and snapshots, extents shared with other files. Every
// function returns 0 (or a count) or -errno, and never follows a path.

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/vfs.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/fiemap.h>
#include <linux/fs.h>

extern void *calloc(size_t nmemb, size_t size);
extern void free(void *ptr);

/// `fstatfs(2)`'s `f_type`: the magic number of the file system holding `fd`. 0 or -errno.
static inline int lockwipe_fs_magic(int fd, uint32_t *magic) {
    struct statfs fs;
    if (fstatfs(fd, &fs) != 0) return -errno;
    *magic = (uint32_t)fs.f_type;
    return 0;
}

/// `FS_IOC_GETFSUUID` (Linux 6.5; defined here for older headers): the UUID of the file
/// system holding `fd`, as the file system reports it. Returns its length (16), or
/// -errno (-ENOTTY on older kernels or file systems without one).
static inline int lockwipe_fs_uuid(int fd, uint8_t uuid[16]) {
    struct { uint8_t len; uint8_t uuid[16]; } arg;
    __builtin_memset(&arg, 0, sizeof(arg));
    // _IOR(0x15, 0, struct fsuuid2), struct fsuuid2 being 17 bytes.
    unsigned long request = (2UL << 30) | (17UL << 16) | (0x15UL << 8) | 0UL;
    if (ioctl(fd, request, &arg) < 0) return -errno;
    if (arg.len == 0 || arg.len > 16) return -EINVAL;
    __builtin_memcpy(uuid, arg.uuid, arg.len);
    return arg.len;
}

/// `BTRFS_IOC_FS_INFO`: the btrfs file system's id (its UUID, `fsid`). 0 or -errno.
static inline int lockwipe_btrfs_fsid(int fd, uint8_t fsid[16]) {
    struct btrfs_ioctl_fs_info_args *arg = calloc(1, sizeof(*arg));
    if (!arg) return -ENOMEM;
    int rc = ioctl(fd, BTRFS_IOC_FS_INFO, arg) >= 0 ? 0 : -errno;
    if (rc == 0) __builtin_memcpy(fsid, arg->fsid, 16);
    free(arg);
    return rc;
}

/// `BTRFS_IOC_GET_SUBVOL_INFO` (unprivileged, Linux 4.18): the UUID of the subvolume
/// holding `fd`, and the UUID of the subvolume it is a snapshot of (zeros when it is
/// none). 0 or -errno.
static inline int lockwipe_btrfs_subvolume(int fd, uint64_t *tree_id, uint8_t uuid[16], uint8_t parent_uuid[16]) {
    struct btrfs_ioctl_get_subvol_info_args *arg = calloc(1, sizeof(*arg));
    if (!arg) return -ENOMEM;
    // Success is any non-negative result: some kernels return 1 from this ioctl when
    // the search for the subvolume's back reference did not land on it exactly.
    int rc = ioctl(fd, BTRFS_IOC_GET_SUBVOL_INFO, arg) >= 0 ? 0 : -errno;
    if (rc == 0) {
        *tree_id = arg->treeid;
        __builtin_memcpy(uuid, arg->uuid, 16);
        __builtin_memcpy(parent_uuid, arg->parent_uuid, 16);
    }
    free(arg);
    return rc;
}

/// The number of subvolumes of the btrfs file system of `fd` that are snapshots of the
/// subvolume `uuid` (their root item's parent UUID is `uuid`), found by walking the root
/// tree's ROOT_ITEMs with `BTRFS_IOC_TREE_SEARCH` (needs CAP_SYS_ADMIN), as
/// `btrfs subvolume show` does. A count, or -errno.
static inline int lockwipe_btrfs_count_snapshots(int fd, const uint8_t uuid[16]) {
    struct btrfs_ioctl_search_args *args = calloc(1, sizeof(*args));
    if (!args) return -ENOMEM;
    struct btrfs_ioctl_search_key *key = &args->key;
    key->tree_id = BTRFS_ROOT_TREE_OBJECTID;
    key->min_objectid = BTRFS_FIRST_FREE_OBJECTID;
    key->max_objectid = BTRFS_LAST_FREE_OBJECTID;
    key->min_type = BTRFS_ROOT_ITEM_KEY;
    key->max_type = BTRFS_ROOT_ITEM_KEY;
    key->min_offset = 0;
    key->max_offset = (uint64_t)-1;
    key->min_transid = 0;
    key->max_transid = (uint64_t)-1;
    int count = 0;
    const size_t parent_at = offsetof(struct btrfs_root_item, parent_uuid);
    for (;;) {
        key->nr_items = 4096;
        if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, args) < 0) {
            int code = -errno;
            free(args);
            return code;
        }
        if (key->nr_items == 0) break;
        size_t off = 0;
        struct btrfs_ioctl_search_header header;
        for (uint32_t i = 0; i < key->nr_items; i++) {
            if (off + sizeof(header) > sizeof(args->buf)) break;
            __builtin_memcpy(&header, args->buf + off, sizeof(header));
            off += sizeof(header);
            if (off + header.len > sizeof(args->buf)) break;
            // Root items written by kernels before 3.6 are shorter and have no UUIDs.
            if (header.type == BTRFS_ROOT_ITEM_KEY && header.len >= parent_at + 16 &&
                __builtin_memcmp(args->buf + off + parent_at, uuid, 16) == 0)
                count++;
            off += header.len;
            key->min_objectid = header.objectid;
            key->min_type = header.type;
            key->min_offset = header.offset;
        }
        // Go on after the last key returned (keys compare as whole tuples: the next
        // search starts just after it, whatever its type).
        if (key->min_offset < (uint64_t)-1) {
            key->min_offset++;
        } else if (key->min_type < (uint8_t)-1) {
            key->min_type++;
            key->min_offset = 0;
        } else if (key->min_objectid < key->max_objectid) {
            key->min_objectid++;
            key->min_type = 0;
            key->min_offset = 0;
        } else {
            break;
        }
    }
    free(args);
    return count;
}

/// Whether any extent of the regular file `fd` is shared with another file or a snapshot
/// (`FS_IOC_FIEMAP`, `FIEMAP_EXTENT_SHARED`): 1, 0, or -errno. Looks at up to 64 extents
/// per call until the last one.
static inline int lockwipe_has_shared_extents(int fd) {
    const uint32_t per_call = 64;
    size_t size = sizeof(struct fiemap) + per_call * sizeof(struct fiemap_extent);
    struct fiemap *map = calloc(1, size);
    if (!map) return -ENOMEM;
    uint64_t start = 0;
    for (;;) {
        __builtin_memset(map, 0, size);
        map->fm_start = start;
        map->fm_length = FIEMAP_MAX_OFFSET - start;
        map->fm_flags = FIEMAP_FLAG_SYNC;
        map->fm_extent_count = per_call;
        if (ioctl(fd, FS_IOC_FIEMAP, map) < 0) {
            int code = -errno;
            free(map);
            return code;
        }
        if (map->fm_mapped_extents == 0) break;
        for (uint32_t i = 0; i < map->fm_mapped_extents; i++) {
            if (map->fm_extents[i].fe_flags & FIEMAP_EXTENT_SHARED) {
                free(map);
                return 1;
            }
        }
        struct fiemap_extent *last = &map->fm_extents[map->fm_mapped_extents - 1];
        if (last->fe_flags & FIEMAP_EXTENT_LAST) break;
        start = last->fe_logical + last->fe_length;
    }
    free(map);
    return 0;
}

#endif
