#ifndef LOCKWIPE_HEAP_H
#define LOCKWIPE_HEAP_H

// glibc's malloc_trim and mallopt, which Swift's Glibc module does not export. Declared
// here rather than by including <malloc.h>, as timers.h does.

#include <stddef.h>

extern int malloc_trim(size_t pad);
extern int mallopt(int param, int value);

/// `malloc_trim(0)`: gives the free pages of every arena back to the kernel. 1 when some
/// memory was released, 0 when none was.
static inline int lockwipe_malloc_trim(void) {
    return malloc_trim(0);
}

/// `mallopt(M_ARENA_MAX, count)` (M_ARENA_MAX is -8 in glibc's <malloc.h>): threads that
/// start allocating from now on share at most `count` arenas. 1 on success.
static inline int lockwipe_limit_malloc_arenas(int count) {
    return mallopt(-8, count);
}

#endif
