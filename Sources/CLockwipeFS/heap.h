#ifndef LOCKWIPE_HEAP_H
#define LOCKWIPE_HEAP_H

// glibc's malloc_trim, which Swift's Glibc module does not export. Declared here rather
// than by including <malloc.h>, as timers.h does.

#include <stddef.h>

extern int malloc_trim(size_t pad);

/// `malloc_trim(0)`: gives the free pages of every arena back to the kernel. 1 when some
/// memory was released, 0 when none was.
static inline int lockwipe_malloc_trim(void) {
    return malloc_trim(0);
}

#endif
