/* Preloaded into a program under test (LD_PRELOAD): its fsync and fdatasync fail
 * with EIO for the files whose path matches REPRISE_TEST_FAIL_SYNC (an fnmatch(3)
 * pattern, where '*' also matches '/'), on the Nth matching call when
 * REPRISE_TEST_FAIL_SYNC_NTH is set, else on every one. Other calls go to the C
 * library's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int matching_calls = 0;

static int should_fail(int fd) {
    const char *pattern = getenv("REPRISE_TEST_FAIL_SYNC");
    if (pattern == NULL) return 0;
    char link[64];
    char path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0) return 0;
    path[len] = '\0';
    if (fnmatch(pattern, path, 0) != 0) return 0;
    matching_calls++;
    const char *nth = getenv("REPRISE_TEST_FAIL_SYNC_NTH");
    return nth == NULL || matching_calls == atoi(nth);
}

/* Fails, or calls the C library's `name` (fsync or fdatasync). */
static int sync_or_fail(const char *name, int fd) {
    if (should_fail(fd)) {
        errno = EIO;
        return -1;
    }
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    return real(fd);
}

int fsync(int fd) { return sync_or_fail("fsync", fd); }

int fdatasync(int fd) { return sync_or_fail("fdatasync", fd); }
