/* proc.c - see proc.h. */
#include "common/proc.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Appends data to the ring of the last outlen-1 bytes. */
static void keep_tail(char *out, size_t outlen, size_t *used, const char *data, size_t n)
{
    if (!out || outlen < 2)
        return;
    size_t cap = outlen - 1;
    if (n >= cap) {
        memcpy(out, data + n - cap, cap);
        *used = cap;
    } else {
        if (*used + n > cap) {
            size_t drop = *used + n - cap;
            memmove(out, out + drop, *used - drop);
            *used -= drop;
        }
        memcpy(out + *used, data, n);
        *used += n;
    }
    out[*used] = '\0';
}

int nb_run(const char *const argv[], char *out, size_t outlen, double timeout_s)
{
    if (out && outlen)
        out[0] = '\0';
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        if (out && outlen)
            snprintf(out, outlen, "%s: %s", argv[0], strerror(rc));
        return 127;
    }
    size_t used = 0;
    double deadline = timeout_s > 0 ? nb_time_mono() + timeout_s : 0;
    bool killed = false;
    for (;;) {
        int wait_ms = -1;
        if (deadline > 0) {
            double left = deadline - nb_time_mono();
            if (left <= 0) {
                kill(pid, SIGKILL);
                killed = true;
                break;
            }
            wait_ms = (int)(left * 1000) + 1;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int n = poll(&p, 1, wait_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            continue;
        char buf[4096];
        ssize_t r = read(fds[0], buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        keep_tail(out, outlen, &used, buf, (size_t)r);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (killed && out && outlen)
        snprintf(out + used, outlen - used, "%s%s: killed after %.0f s", used ? "\n" : "", argv[0],
                 timeout_s);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rc < 0 && errno != ENOENT ? -1 : 0;
}

int nb_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
