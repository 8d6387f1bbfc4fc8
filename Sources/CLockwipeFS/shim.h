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
#include <sys/syscall.h>
#include <stddef.h>
#include <linux/fscrypt.h>
#include <linux/openat2.h>
#include <sys/prctl.h>

// Declared here, not through <stdlib.h>/<string.h>: with _GNU_SOURCE those pull in
// <sys/select.h>, whose fd_set then differs from the one in Dispatch's module and a clean
// build of every module that imports both fails ("__fds_bits ... is not present").
extern void *calloc(size_t nmemb, size_t size);
extern void free(void *ptr);
extern void explicit_bzero(void *s, size_t n);

/// Makes the process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): no core dump of a
/// process holding vault keys, and no ptrace or /proc/PID/mem|environ access from
/// processes without CAP_SYS_PTRACE, even of the same uid. 0, or -errno. (`prctl` is
/// variadic, which Swift cannot call.)
static inline int lockwipe_set_non_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -errno;
}

/// `prctl(PR_GET_DUMPABLE)`: 0 when non-dumpable, or -errno.
static inline int lockwipe_get_dumpable(void) {
    int r = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    return r >= 0 ? r : -errno;
}

/// `pidfd_open(2)`: a descriptor of process `pid` that keeps naming that process, never one
/// that reuses its pid later. The descriptor, or -errno (-ESRCH: no such process).
static inline int lockwipe_pidfd_open(int pid) {
    long r = syscall(SYS_pidfd_open, pid, 0);
    return r >= 0 ? (int)r : -errno;
}

/// `pidfd_send_signal(2)`: `sig` to the process `pidfd` names (-ESRCH once it has exited,
/// whoever has its pid now). 0, or -errno.
static inline int lockwipe_pidfd_send_signal(int pidfd, int sig) {
    return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0 ? 0 : -errno;
}

/// Starts a child that becomes `uid` (group `gid`, no supplementary groups, so no
/// capabilities either) and calls `kill(-1, sig)`: `sig` reaches every process `uid` may
/// signal (whose real or saved uid is hers, in every namespace of hers) but init and the
/// child itself. The kernel sends it to all of them under one lock, and a fork that
/// races it is either already in the list or made to fail, so no fork-and-exit chain
/// outruns it as it outruns a scan of /proc. The child exits 0 when the call returned 0
/// or found no process (ESRCH), 10-13 when a step failed. Only raw system calls run in
/// the child of this multi-threaded process. The child's pid (the caller waits for it,
/// bounded: as her process, the user may stop or kill it), or -errno.
static inline int lockwipe_spawn_signal_as(uint32_t uid, uint32_t gid, int sig) {
    pid_t child = fork();
    if (child < 0) return -errno;
    if (child == 0) {
        if (syscall(SYS_setgroups, 0, NULL) != 0) _exit(10);
        if (syscall(SYS_setresgid, gid, gid, gid) != 0) _exit(11);
        if (syscall(SYS_setresuid, uid, uid, uid) != 0) _exit(12);
        if (syscall(SYS_kill, -1, sig) != 0 && errno != ESRCH) _exit(13);
        _exit(0);
    }
    return child;
}

/// Takes a classic (process-associated) exclusive write lock on the whole of `fd`
/// without waiting: 0, or -errno (-EAGAIN/-EACCES: another process holds it). Not an
/// OFD lock: F_GETLK reports a classic lock's holder pid, an OFD lock's as -1. The lock
/// goes with the process (never inherited by fork) and with the first close of any
/// descriptor of the file in this process: the holder opens it once and keeps it open.
static inline int lockwipe_lock_whole_file(int fd) {
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    return fcntl(fd, F_SETLK, &fl) == 0 ? 0 : -errno;
}

/// Whether another process holds a lock that conflicts with an exclusive lock on `fd`:
/// 1 (its pid in `*pid`, 0 when it is in another pid namespace), 0 when none does now,
/// or -errno.
static inline int lockwipe_lock_holder(int fd, int *pid) {
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    if (fcntl(fd, F_GETLK, &fl) != 0) return -errno;
    if (fl.l_type == F_UNLCK) return 0;
    *pid = (int)fl.l_pid;
    return 1;
}

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

/// `openat2(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)` with
/// `RESOLVE_NO_SYMLINKS`: a directory reached without following a symlink in any
/// component, so whoever owns a directory on the way cannot redirect it. fd, or -errno.
static inline int lockwipe_open_directory_no_symlinks(const char *path) {
    struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    return fd >= 0 ? (int)fd : -errno;
}

/// `openat2(dirfd, path, flags | O_CLOEXEC, resolve)`: fd, or -errno. With
/// `RESOLVE_NO_XDEV` a mount point on the way (the last component included) is seen
/// (EXDEV), not crossed; with `O_PATH` (`lockwipe_o_path`) the descriptor is taken without
/// asking the filesystem that is opened anything (a FUSE server is never called).
static inline int lockwipe_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
    struct open_how how = {.flags = flags | O_CLOEXEC, .resolve = resolve};
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
    return fd >= 0 ? (int)fd : -errno;
}

/// `umount2(path, MNT_DETACH)` (by the system call: <sys/mount.h> clashes with the
/// <linux/fs.h> above in glibc 2.36). 0, or -errno.
static inline int lockwipe_detach_mount(const char *path) {
    return syscall(SYS_umount2, path, 2 /* MNT_DETACH */) == 0 ? 0 : -errno;
}

static const uint64_t lockwipe_o_path = O_PATH;
static const uint64_t lockwipe_resolve_no_xdev = RESOLVE_NO_XDEV;
static const uint64_t lockwipe_resolve_no_symlinks = RESOLVE_NO_SYMLINKS;
static const uint64_t lockwipe_resolve_no_magiclinks = RESOLVE_NO_MAGICLINKS;
static const uint64_t lockwipe_resolve_beneath = RESOLVE_BENEATH;
// O_TMPFILE is a composite macro Swift does not import.
static const int lockwipe_o_tmpfile = O_TMPFILE;

/// `sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`: starts writeback of the file's
/// dirty pages and returns without waiting for it. It promises no durability (no
/// metadata, no disk cache flush): a batch is still made durable (`WipeRun.flush`) before
/// any file of it is unlinked. It only lets the disk write one file while the next file's
/// pattern is generated, instead of holding everything dirty until the batch's flush.
/// 0, or -errno.
static inline int lockwipe_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0 ? 0 : -errno;
}

/// `sync_file_range(fd, 0, 0, WAIT_BEFORE | WRITE | WAIT_AFTER)`: writes the file's dirty
/// pages and waits until the device has completed those writes. It does not write the
/// file's metadata or flush the device's volatile cache (sync_file_range(2)): over
/// already-allocated blocks of a file system that overwrites in place (ext4, xfs) the
/// data is then on the device, and one `fdatasync` per batch flushes the cache.
/// 0, or -errno.
static inline int lockwipe_wait_written(int fd) {
    return sync_file_range(fd, 0, 0,
        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) == 0 ? 0 : -errno;
}

/// `renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)`: atomically exchanges two
/// names. Used by the tests' racers (the attack a vault must withstand); 0 or -errno.
static inline int lockwipe_rename_exchange(const char *a, const char *b) {
    return syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */) == 0 ? 0 : -errno;
}

/// `renameat2(olddirfd, oldname, newdirfd, newname, RENAME_NOREPLACE)`: renames
/// without replacing what already has the new name (EEXIST then). 0, or -errno.
static inline int lockwipe_rename_noreplace(int olddirfd, const char *oldname, int newdirfd, const char *newname) {
    return syscall(SYS_renameat2, olddirfd, oldname, newdirfd, newname, 1 /* RENAME_NOREPLACE */) == 0 ? 0 : -errno;
}

/// `EXT4_IOC_CHECKPOINT` (Linux 5.13; defined here for older headers): commits ext4's
/// journal, writes every journalled block to its place on the disk, and with
/// `lockwipe_ext4_checkpoint_zeroout` then overwrites the whole journal with zeros.
/// Needs CAP_SYS_ADMIN. 0, or -errno (-ENOTTY before 5.13 or on another file system,
/// -EINVAL without a journal).
static inline int lockwipe_ext4_checkpoint(int fd, uint32_t flags) {
    return ioctl(fd, _IOW('f', 43, uint32_t), &flags) == 0 ? 0 : -errno;
}
static const uint32_t lockwipe_ext4_checkpoint_zeroout = 2;

static const unsigned int lockwipe_immutable_flag = FS_IMMUTABLE_FL;
static const unsigned int lockwipe_append_flag = FS_APPEND_FL;

// MARK: fscrypt v2 (encrypted vaults). Every function returns 0 (or a documented
// non-negative value) or -errno. Keys are identified by their 16-byte identifier, which
// the kernel derives from the key itself.

/// Adds a raw key (64 bytes for AES-256-XTS) to the filesystem of `fd` for all users
/// and returns its identifier.
static inline int lockwipe_fscrypt_add_key(int fd, const uint8_t *raw, uint32_t raw_size, uint8_t identifier[16]) {
    struct fscrypt_add_key_arg *arg = calloc(1, sizeof(*arg) + raw_size);
    if (arg == NULL) {
        return -ENOMEM;
    }
    arg->key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
    arg->raw_size = raw_size;
    __builtin_memcpy(arg->raw, raw, raw_size);
    int rc = ioctl(fd, FS_IOC_ADD_ENCRYPTION_KEY, arg) == 0 ? 0 : -errno;
    if (rc == 0) {
        __builtin_memcpy(identifier, arg->key_spec.u.identifier, 16);
    }
    explicit_bzero(arg->raw, raw_size);
    free(arg);
    return rc;
}

/// Makes the empty directory `fd` an fscrypt v2 directory under the key `identifier`
/// (AES-256-XTS contents, AES-256-CTS file names).
static inline int lockwipe_fscrypt_set_policy(int fd, const uint8_t identifier[16]) {
    struct fscrypt_policy_v2 policy;
    __builtin_memset(&policy, 0, sizeof(policy));
    policy.version = FSCRYPT_POLICY_V2;
    policy.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS;
    policy.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS;
    policy.flags = FSCRYPT_POLICY_FLAGS_PAD_32;
    __builtin_memcpy(policy.master_key_identifier, identifier, 16);
    return ioctl(fd, FS_IOC_SET_ENCRYPTION_POLICY, &policy) == 0 ? 0 : -errno;
}

/// The v2 key identifier of the encrypted directory `fd`: 0, -ENODATA when it is not
/// encrypted, -EINVAL for a v1 policy, -ENOTTY/-EOPNOTSUPP without fscrypt.
static inline int lockwipe_fscrypt_get_policy(int fd, uint8_t identifier[16]) {
    struct fscrypt_get_policy_ex_arg arg;
    __builtin_memset(&arg, 0, sizeof(arg));
    arg.policy_size = sizeof(arg.policy);
    if (ioctl(fd, FS_IOC_GET_ENCRYPTION_POLICY_EX, &arg) != 0) {
        return -errno;
    }
    if (arg.policy.version != FSCRYPT_POLICY_V2) {
        return -EINVAL;
    }
    __builtin_memcpy(identifier, arg.policy.v2.master_key_identifier, 16);
    return 0;
}

/// Removes the key from the kernel for all users. Returns the removal status flags:
/// 0, or FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY when open files keep it partly in use.
static inline int lockwipe_fscrypt_remove_key(int fd, const uint8_t identifier[16]) {
    struct fscrypt_remove_key_arg arg;
    __builtin_memset(&arg, 0, sizeof(arg));
    arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
    __builtin_memcpy(arg.key_spec.u.identifier, identifier, 16);
    if (ioctl(fd, FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, &arg) != 0) {
        return -errno;
    }
    return (int)arg.removal_status_flags;
}

/// FSCRYPT_KEY_STATUS_ABSENT, _PRESENT or _INCOMPLETELY_REMOVED for the key, or -errno.
static inline int lockwipe_fscrypt_key_status(int fd, const uint8_t identifier[16]) {
    struct fscrypt_get_key_status_arg arg;
    __builtin_memset(&arg, 0, sizeof(arg));
    arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
    __builtin_memcpy(arg.key_spec.u.identifier, identifier, 16);
    if (ioctl(fd, FS_IOC_GET_ENCRYPTION_KEY_STATUS, &arg) != 0) {
        return -errno;
    }
    return (int)arg.status;
}

static const int lockwipe_fscrypt_status_absent = FSCRYPT_KEY_STATUS_ABSENT;
static const int lockwipe_fscrypt_status_present = FSCRYPT_KEY_STATUS_PRESENT;
static const int lockwipe_fscrypt_status_incompletely_removed = FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED;
static const int lockwipe_fscrypt_removal_files_busy = FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY;

#endif
