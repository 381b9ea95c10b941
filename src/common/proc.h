/* proc.h - running the host tools nubo relies on (qemu-img, genisoimage),
 * as oslo.concurrency's processutils.execute: no shell, arguments as given, output
 * captured for the error message, a time limit. */
#ifndef NB_PROC_H
#define NB_PROC_H

#include <stddef.h>

/* Runs argv[0] (looked up in PATH) with argv, stdin from /dev/null, stdout
 * and stderr captured together into out (NUL-terminated, the last outlen-1
 * bytes kept when longer; out may be NULL). Kills the process after
 * timeout_s seconds (<= 0: no limit). Returns the exit status (0..255),
 * 127 when the program cannot be started, 128+signal when it was killed,
 * or -1 when nothing could be run (fork/pipe failure). */
int nb_run(const char *const argv[], char *out, size_t outlen, double timeout_s);

/* Removes path and everything under it (no symlinks followed). 0, or -1
 * with errno set from the first failure; a missing path is 0. */
int nb_rm_rf(const char *path);

#endif
