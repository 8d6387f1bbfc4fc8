#ifndef LOCKWIPE_TIMERS_H
#define LOCKWIPE_TIMERS_H

// timerfd and eventfd, which Swift's Glibc module does not export. Declared here rather
// than by including <sys/timerfd.h>: like shim.h, this header keeps clear of the libc
// headers that clash with Dispatch's in a clean build.

#include <fcntl.h>
#include <stdint.h>
#include <time.h>
#include <bits/types/struct_itimerspec.h>

extern int timerfd_create(int clockid, int flags);
extern int timerfd_settime(int fd, int flags, const struct itimerspec *new_value, struct itimerspec *old_value);
extern int eventfd(unsigned int initval, int flags);

/// A non-blocking, close-on-exec timerfd on `clockid`, or -1 (errno set).
static inline int lockwipe_timerfd_create(int clockid) {
    return timerfd_create(clockid, O_CLOEXEC | O_NONBLOCK);
}

/// Arms `fd` to expire once, `seconds` from now; 0 disarms. 0 or -1 (errno set).
static inline int lockwipe_timerfd_arm_relative(int fd, int64_t seconds) {
    struct itimerspec spec;
    __builtin_memset(&spec, 0, sizeof(spec));
    spec.it_value.tv_sec = (time_t)seconds;
    return timerfd_settime(fd, 0, &spec, 0);
}

/// Arms `fd` to expire once, `nanos` (at least 1) nanoseconds from now. 0 or -1 (errno set).
static inline int lockwipe_timerfd_arm_relative_nanos(int fd, int64_t nanos) {
    struct itimerspec spec;
    __builtin_memset(&spec, 0, sizeof(spec));
    if (nanos < 1) nanos = 1;
    spec.it_value.tv_sec = (time_t)(nanos / 1000000000);
    spec.it_value.tv_nsec = (long)(nanos % 1000000000);
    return timerfd_settime(fd, 0, &spec, 0);
}

/// Arms a CLOCK_REALTIME `fd` at the absolute time `at` with TFD_TIMER_CANCEL_ON_SET: a
/// read then fails with ECANCELED once the clock is set (or the machine resumes).
static inline int lockwipe_timerfd_arm_cancel_on_set(int fd, int64_t at) {
    struct itimerspec spec;
    __builtin_memset(&spec, 0, sizeof(spec));
    spec.it_value.tv_sec = (time_t)at;
    return timerfd_settime(fd, 1 /* TFD_TIMER_ABSTIME */ | 2 /* TFD_TIMER_CANCEL_ON_SET */, &spec, 0);
}

/// A non-blocking, close-on-exec eventfd, or -1 (errno set).
static inline int lockwipe_eventfd(void) {
    return eventfd(0, O_CLOEXEC | O_NONBLOCK);
}

#endif
