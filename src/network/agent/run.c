/* run.c - the agent's commands (internal.h: na_run, na_must): fork, join
 * the network namespace /run/netns/<ns> when one is named (as `ip netns
 * exec` does), exec without a shell, output captured, a time limit.
 *
 * The child starts a session of its own, with every signal unblocked and
 * at its default and no descriptor but 0-2, so a daemon it leaves behind
 * (dnsmasq) holds none of the process's sockets and outlives it. The wait
 * ends when the child exits even if a daemon it forked keeps the output
 * pipe open. */
#include "common/cleanup.h"
#include "common/log.h"
#include "common/sbuf.h"
#include "common/util.h"
#include "network/agent/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_RUN "nubo.network.agent"

extern char **environ;

/* The program's path: argv0 itself when it has a slash, else the first
 * executable match in PATH, /usr/sbin and /sbin. 0/-1. */
static int find_program(const char *argv0, char *path, size_t n)
{
    if (strchr(argv0, '/')) {
        nb_strlcpy(path, argv0, n);
        return access(path, X_OK);
    }
    const char *env = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin:/usr/bin:/bin", env ? env : "/usr/local/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, n, "%s/%s", d, argv0);
        if (access(path, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* The command line for the log (arguments quoted when they need it). */
static char *cmdline(const char *netns, const char *const argv[])
{
    struct nb_sbuf b = {0};
    if (netns) {
        nb_sbuf_str(&b, "ip netns exec ");
        nb_sbuf_str(&b, netns);
        nb_sbuf_str(&b, " ");
    }
    for (int i = 0; argv[i]; i++) {
        if (i)
            nb_sbuf_str(&b, " ");
        bool q = !*argv[i] || strpbrk(argv[i], " \t'\"$;&|<>*?()");
        if (q)
            nb_sbuf_str(&b, "'");
        nb_sbuf_str(&b, argv[i]);
        if (q)
            nb_sbuf_str(&b, "'");
    }
    if (!b.s)
        nb_sbuf_str(&b, "");
    return b.s;
}

/* In the child: namespace, descriptors, signals, exec. Never returns. */
static void child(int nsfd, int in_fd, int out_fd, const char *path, const char *const argv[])
{
    if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
        _exit(126);
    setsid();
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    close_range(3, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    execve(path, (char *const *)argv, environ);
    _exit(127);
}

/* Waits for pid, feeding stdin_text to in (closed then) and collecting
 * out into b, until it exits (a daemon it left may keep out open) or the
 * deadline. Returns the wait status, or -1 on timeout (the child killed). */
static int collect(pid_t pid, int in, int out, const char *stdin_text, int timeout_ms,
                   struct nb_sbuf *b)
{
    size_t in_len = stdin_text ? strlen(stdin_text) : 0, in_off = 0;
    if (in >= 0 && in_off == in_len) {
        close(in);
        in = -1;
    }
    double deadline = nb_time_mono() + (timeout_ms > 0 ? timeout_ms : 30000) / 1000.0;
    int status = 0;
    bool exited = false;
    for (;;) {
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = true;
        struct pollfd p[2] = {{.fd = out, .events = POLLIN}, {.fd = in, .events = POLLOUT}};
        int n = poll(p, in >= 0 ? 2 : 1, exited ? 0 : 20);
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0 && (p[0].revents & (POLLIN | POLLHUP))) {
            char buf[4096];
            ssize_t r = read(out, buf, sizeof(buf));
            if (r > 0)
                nb_sbuf_add(b, buf, (size_t)r);
            else if (r == 0 || errno != EINTR)
                break;
            continue;
        }
        if (in >= 0 && n > 0 && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w =
                (p[1].revents & POLLOUT) ? write(in, stdin_text + in_off, in_len - in_off) : -1;
            if (w > 0)
                in_off += (size_t)w;
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || in_off == in_len) {
                close(in);
                in = -1;
            }
            continue;
        }
        if (exited)
            break;
        if (nb_time_mono() > deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            if (in >= 0)
                close(in);
            return -1;
        }
    }
    if (in >= 0)
        close(in);
    if (!exited)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    return status;
}

/* Forks and runs path; *status gets the wait status (-1: timed out).
 * 0, or -1 with *why set when nothing could be started. */
static int spawn(int nsfd, const char *path, const char *const argv[], const char *stdin_text,
                 int timeout_ms, struct nb_sbuf *b, int *status, const char **why)
{
    int in[2], out[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        *why = strerror(errno);
        return -1;
    }
    int prc;
    if (stdin_text) {
        prc = pipe2(in, O_CLOEXEC);
        if (prc == 0)
            fcntl(in[1], F_SETFL, O_NONBLOCK);
    } else {
        in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        in[1] = -1;
        prc = in[0] < 0 ? -1 : 0;
    }
    if (prc < 0) {
        *why = strerror(errno);
        close(out[0]);
        close(out[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        child(nsfd, in[0], out[1], path, argv);
    int err = errno;
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
        if (in[1] >= 0)
            close(in[1]);
        close(out[0]);
        *why = strerror(err);
        return -1;
    }
    *status = collect(pid, in[1], out[0], stdin_text, timeout_ms, b);
    close(out[0]);
    return 0;
}

int na_run(struct nb_ctx *ctx, const char *netns, const char *const argv[], const char *stdin_text,
           int timeout_ms, char **out)
{
    if (out)
        *out = NULL;
    char *line = cmdline(netns, argv);
    NB_DEBUG(LOG_RUN, ctx, NULL, "Running command: %s", line);
    struct nb_sbuf b = {0};
    char path[PATH_MAX];
    const char *why = NULL;
    int nsfd = -1, status = 0, rc = -1;
    if (find_program(argv[0], path, sizeof(path)) < 0) {
        why = "command not found";
    } else if (netns) {
        char nspath[PATH_MAX];
        snprintf(nspath, sizeof(nspath), "/run/netns/%s", netns);
        nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
        if (nsfd < 0)
            why = errno == ENOENT ? "network namespace not found" : strerror(errno);
    }
    if (!why && spawn(nsfd, path, argv, stdin_text, timeout_ms, &b, &status, &why) == 0) {
        if (status == -1) {
            char msg[64];
            snprintf(msg, sizeof(msg), "%s(killed after %d ms)", b.len ? "\n" : "", timeout_ms);
            nb_sbuf_str(&b, msg);
            rc = 128 + SIGKILL;
        } else if (WIFEXITED(status)) {
            rc = WEXITSTATUS(status);
            if (rc == 126 && netns)
                nb_sbuf_str(&b, "cannot enter the network namespace");
        } else {
            rc = 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        }
    }
    if (nsfd >= 0)
        close(nsfd);
    if (why) {
        b.len = 0;
        nb_sbuf_str(&b, why);
        NB_DEBUG(LOG_RUN, ctx, NULL, "Cannot run %s: %s", line, why);
    } else {
        NB_DEBUG(LOG_RUN, ctx, NULL, "Exit code: %d (%s)", rc, line);
    }
    free(line);
    if (!b.s)
        nb_sbuf_str(&b, "");
    while (b.len && (b.s[b.len - 1] == '\n' || b.s[b.len - 1] == ' '))
        b.s[--b.len] = '\0';
    if (out)
        *out = b.s;
    else
        free(b.s);
    return rc;
}

int na_must(struct nb_ctx *ctx, const char *netns, const char *const argv[], const char *stdin_text)
{
    char *out = NULL;
    int rc = na_run(ctx, netns, argv, stdin_text, 30000, &out);
    if (rc != 0) {
        char *line = cmdline(netns, argv);
        NB_WARN(LOG_RUN, ctx, NULL, "Command %s failed (exit %d): %s", line, rc, out);
        nb_error(ctx, 500, NULL, "%s: %s", line, out && *out ? out : "failed");
        free(line);
        free(out);
        return -1;
    }
    free(out);
    return 0;
}

pid_t na_daemon_pid(const char *pidfile, const char *want)
{
    char path[PATH_MAX];
    _cleanup_free_ char *text = nb_read_file(pidfile, NULL);
    long pid = text ? atol(text) : 0;
    if (pid <= 1)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    _cleanup_free_ char *stat = nb_read_file(path, NULL);
    const char *st = stat ? strrchr(stat, ')') : NULL;
    if (!st || (st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X')))
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
    size_t len = 0;
    _cleanup_free_ char *cmd = nb_read_file(path, &len);
    bool ours = false;
    for (size_t off = 0; cmd && off < len; off += strlen(cmd + off) + 1)
        ours |= !strcmp(cmd + off, want);
    return ours ? (pid_t)pid : 0;
}

bool na_runs_in(pid_t pid, const char *ns)
{
    char a[64], b[PATH_MAX];
    snprintf(a, sizeof(a), "/proc/%d/ns/net", (int)pid);
    snprintf(b, sizeof(b), "/run/netns/%s", ns);
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_ino == sb.st_ino &&
           sa.st_dev == sb.st_dev;
}

pid_t na_daemon_stop(const char *pidfile, const char *want)
{
    pid_t pid = na_daemon_pid(pidfile, want);
    if (!pid)
        return 0;
    kill(pid, SIGTERM);
    for (int i = 0; i < 40 && na_daemon_pid(pidfile, want) == pid; i++)
        usleep(50 * 1000);
    if (na_daemon_pid(pidfile, want) == pid)
        kill(pid, SIGKILL);
    return pid;
}
