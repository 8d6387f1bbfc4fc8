/*
 * pam_lockwipe: lockwipe's PAM module, for pam-auth-update's lockwipe profile
 * (pam-auth-update --enable lockwipe). It has two sides, each running lockwipectl:
 *
 * The lift at login (auth): "auth optional pam_lockwipe.so" in common-auth, after the
 * module that checks the password (an Additional module: it runs only when the login was
 * accepted). It hands the password the auth stack already holds (PAM_AUTHTOK) to
 * `lockwipectl pam-auth`, which hands it to lockwiped (LiftAtLogin). When there is no
 * PAM_AUTHTOK (the login needed no password: nullok, a fingerprint, a smartcard) it does
 * nothing and never prompts, as pam_fscrypt does. pam_exec expose_authtok, which it
 * replaces, asked for a "Password: " in that case, checked by nobody, and left the answer
 * in PAM_AUTHTOK for the modules after it (docs/security.md, issue 40 finding 7). It never
 * decides a login: every path returns PAM_IGNORE, which libpam leaves out of the stack's
 * result whatever the control flag.
 *
 * The login gate (account): "account required pam_lockwipe.so" in common-account. It
 * runs `lockwipectl pam-account` and decides by its exit status: 0 lets the login
 * through (PAM_SUCCESS; what it printed, a notice of a lock the user may lift or of a
 * coming lock or wipe, is shown as information), 1 refuses it (PAM_PERM_DENIED, which
 * login programs report as "Permission denied"; what it printed, the reason, is shown as
 * an error message). Anything else (lockwipectl missing or killed, a usage error, no
 * answer within 30 s) lets the login through and says so in syslog (authpriv): a broken
 * gate must not lock everyone out, root included. pam_exec, which it replaces, turned
 * every refusal into PAM_SYSTEM_ERR ("su: System error" after the reason). Under
 * PAM_SILENT nothing is shown. What lockwipectl writes to standard error goes to syslog,
 * never to the user's terminal.
 *
 * Arguments (both optional, both sides):
 *   lockwipectl=PATH   the lockwipectl to run, an absolute path (default /usr/bin/lockwipectl)
 *   socket=PATH        passed on as lockwipectl --socket PATH
 *
 * The command runs as pam_exec seteuid ran it: with the effective user ID as its real
 * one too (root under a setuid program such as su), no descriptors but its standard
 * ones, no shell, and an environment of its own: PAM_USER, PAM_TYPE (auth or account),
 * PAM_SERVICE and PATH. For pam-auth its standard input is a pipe holding the password
 * and a NUL, its standard output and error /dev/null; for pam-account its standard input
 * is /dev/null and its standard output and error are pipes read by the module (the first
 * 4 KiB of each are kept).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <syslog.h>
#include <unistd.h>

#define PAM_SM_AUTH
#define PAM_SM_ACCOUNT
#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define DEFAULT_LOCKWIPECTL "/usr/bin/lockwipectl"
/* What the module keeps of each output stream of pam-account; the rest is read and dropped. */
#define OUTPUT_MAX 4096
/* How long the login gate waits for lockwipectl (which gives up on lockwiped after 10 s). */
#define ACCOUNT_TIMEOUT_MS 30000

static int write_all(int fd, const char *bytes, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, bytes, length);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        bytes += n;
        length -= (size_t)n;
    }
    return 0;
}

/* The child between fork and exec: only async-signal-safe calls. in_fd becomes standard
 * input; out_fd and err_fd (-1: /dev/null) standard output and error. */
static void exec_child(int in_fd, int out_fd, int err_fd, const char *path, char *const argv[], char *const envp[])
{
    sigset_t none;
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

    if (null_fd < 0)
        _exit(127);
    if (in_fd < 0)
        in_fd = null_fd;
    if (out_fd < 0)
        out_fd = null_fd;
    if (err_fd < 0)
        err_fd = null_fd;
    /* All above 2 first: in a program that closed its standard descriptors any may be
     * one of them, and dup2 onto itself would keep its close-on-exec flag. */
    if ((in_fd = fcntl(in_fd, F_DUPFD_CLOEXEC, 3)) < 0 || (out_fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
        (err_fd = fcntl(err_fd, F_DUPFD_CLOEXEC, 3)) < 0)
        _exit(127);
    if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
        _exit(127);
    if (close_range(3, ~0U, 0) != 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < (max > 0 ? max : 65536); fd++)
            close((int)fd);
    }
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* pam_exec's seteuid: lockwiped hands LiftAtLogin to root only. */
    if (setuid(geteuid()) != 0)
        _exit(127);
    execve(path, argv, envp);
    _exit(127);
}

/* One run of lockwipectl VERB for USER, as the header says. For pam-auth, in_fd is the
 * pipe holding the password; for pam-account, out and err (each OUTPUT_MAX + 1 bytes, or
 * NULL) receive standard output and error, NUL-terminated. Returns the wait status, or -1
 * when lockwipectl could not be run or did not end within timeout_ms (then *why says why,
 * for syslog). */
static int run_lockwipectl(const char *lockwipectl, const char *socket, const char *verb, const char *type,
                           const char *user, const char *service, int in_fd, char *out, char *err, int timeout_ms,
                           const char **why)
{
    char *env_user = NULL, *env_service = NULL, *env_type = NULL;
    char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char *argv[5], *envp[5];
    int argc = 0, status = -1, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    size_t out_len = 0, err_len = 0;
    pid_t pid;

    *why = NULL;
    if (out)
        out[0] = '\0';
    if (err)
        err[0] = '\0';
    if (asprintf(&env_user, "PAM_USER=%s", user) < 0)
        env_user = NULL; /* undefined after a failure */
    if (asprintf(&env_service, "PAM_SERVICE=%s", service ? service : "") < 0)
        env_service = NULL;
    if (asprintf(&env_type, "PAM_TYPE=%s", type) < 0)
        env_type = NULL;
    if (env_user == NULL || env_service == NULL || env_type == NULL) {
        *why = "out of memory";
        goto out;
    }
    envp[0] = env_user;
    envp[1] = env_type;
    envp[2] = env_service;
    envp[3] = env_path;
    envp[4] = NULL;
    argv[argc++] = (char *)lockwipectl;
    if (socket) {
        argv[argc++] = (char *)"--socket";
        argv[argc++] = (char *)socket;
    }
    argv[argc++] = (char *)verb;
    argv[argc] = NULL;

    if ((out && pipe2(out_pipe, O_CLOEXEC) != 0) || (err && pipe2(err_pipe, O_CLOEXEC) != 0)) {
        *why = "pipe failed";
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        *why = "fork failed";
        goto out;
    }
    if (pid == 0)
        exec_child(in_fd, out_pipe[1], err_pipe[1], lockwipectl, argv, envp);
    if (out_pipe[1] >= 0) {
        close(out_pipe[1]);
        out_pipe[1] = -1;
    }
    if (err_pipe[1] >= 0) {
        close(err_pipe[1]);
        err_pipe[1] = -1;
    }

    /* Read both streams to their end (the child's exit closes them), keeping the first
     * OUTPUT_MAX bytes of each, within the deadline. */
    {
        struct timespec start, now;
        clock_gettime(CLOCK_MONOTONIC, &start);
        while (out_pipe[0] >= 0 || err_pipe[0] >= 0) {
            struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
            long elapsed;
            int n;
            clock_gettime(CLOCK_MONOTONIC, &now);
            elapsed = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
            if (elapsed >= timeout_ms) {
                kill(pid, SIGKILL);
                *why = "no answer in time";
                break;
            }
            n = poll(fds, 2, (int)(timeout_ms - elapsed));
            if (n < 0 && errno != EINTR) {
                kill(pid, SIGKILL);
                *why = "poll failed";
                break;
            }
            for (int i = 0; n > 0 && i < 2; i++) {
                int *fd = i == 0 ? &out_pipe[0] : &err_pipe[0];
                char *buffer = i == 0 ? out : err;
                size_t *length = i == 0 ? &out_len : &err_len;
                char scratch[512];
                ssize_t got;
                if (fds[i].fd < 0 || fds[i].revents == 0)
                    continue;
                if (*length < OUTPUT_MAX)
                    got = read(*fd, buffer + *length, OUTPUT_MAX - *length);
                else
                    got = read(*fd, scratch, sizeof scratch);
                if (got > 0 && *length < OUTPUT_MAX) {
                    *length += (size_t)got;
                    buffer[*length] = '\0';
                } else if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
                    close(*fd);
                    *fd = -1;
                }
            }
        }
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            /* ECHILD: the program ignores SIGCHLD; the child is gone unseen. */
            if (*why == NULL)
                *why = "its exit status was lost (the program ignores SIGCHLD)";
            status = -1;
            break;
        }
    }
    if (*why != NULL)
        status = -1;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
        *why = "it could not be run";
        status = -1;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (out_pipe[i] >= 0)
            close(out_pipe[i]);
        if (err_pipe[i] >= 0)
            close(err_pipe[i]);
    }
    free(env_user);
    free(env_service);
    free(env_type);
    return status;
}

static void lift_at_login(pam_handle_t *pamh, const char *lockwipectl, const char *socket, const char *user,
                          const char *service, const char *password)
{
    const char *why;
    int fds[2], status;

    /* The password and its NUL go into the pipe before the fork: at most PAM_MAX_RESP_SIZE
     * (512) bytes, which a pipe's buffer (a page at least) holds, so the write neither blocks
     * nor meets a reader that is gone (no SIGPIPE in the login program). */
    if (pipe2(fds, O_CLOEXEC) != 0) {
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: pipe: %m");
        return;
    }
    if (write_all(fds[1], password, strnlen(password, PAM_MAX_RESP_SIZE)) != 0 || write_all(fds[1], "", 1) != 0) {
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: writing the password to %s: %m", lockwipectl);
        close(fds[0]);
        close(fds[1]);
        return;
    }
    close(fds[1]);
    status = run_lockwipectl(lockwipectl, socket, "pam-auth", "auth", user, service, fds[0], NULL, NULL, -1, &why);
    close(fds[0]);
    if (status < 0)
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: %s pam-auth: %s", lockwipectl, why);
    else if (WIFSIGNALED(status))
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: %s pam-auth was killed by signal %d",
                   lockwipectl, WTERMSIG(status));
}

/* Reads the module's arguments; 0 when one is not known (said in syslog). */
static int parse_arguments(pam_handle_t *pamh, int argc, const char **argv, const char *side, const char **lockwipectl,
                           const char **socket)
{
    *lockwipectl = DEFAULT_LOCKWIPECTL;
    *socket = NULL;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "lockwipectl=", 12) == 0 && argv[i][12] == '/') {
            *lockwipectl = argv[i] + 12;
        } else if (strncmp(argv[i], "socket=", 7) == 0 && argv[i][7] != '\0') {
            *socket = argv[i] + 7;
        } else {
            pam_syslog(pamh, LOG_ERR,
                       "%s: the PAM configuration gives pam_lockwipe.so '%s'; "
                       "it takes lockwipectl=/ABSOLUTE/PATH and socket=PATH",
                       side, argv[i]);
            return 0;
        }
    }
    return 1;
}

/* Each line of what lockwipectl wrote to standard error, to syslog. */
static void log_lines(pam_handle_t *pamh, int priority, const char *lockwipectl, char *text)
{
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
        pam_syslog(pamh, priority, "%s pam-account: %s", lockwipectl, line);
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    const char *lockwipectl, *socket;
    const void *password = NULL, *user = NULL, *service = NULL;
    (void)flags;

    if (!parse_arguments(pamh, argc, argv, "the lock is not lifted at login", &lockwipectl, &socket))
        return PAM_IGNORE;
    /* No password in the stack: nothing to hand on, and nobody to ask. */
    if (pam_get_item(pamh, PAM_AUTHTOK, &password) != PAM_SUCCESS || password == NULL ||
        *(const char *)password == '\0')
        return PAM_IGNORE;
    /* PAM_USER as it is (pam_get_user could prompt). */
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || user == NULL || *(const char *)user == '\0')
        return PAM_IGNORE;
    if (pam_get_item(pamh, PAM_SERVICE, &service) != PAM_SUCCESS)
        service = NULL;
    lift_at_login(pamh, lockwipectl, socket, user, service, password);
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    (void)pamh;
    (void)flags;
    (void)argc;
    (void)argv;
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_acct_mgmt(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    const char *lockwipectl, *socket, *why;
    const void *user = NULL, *service = NULL;
    char out[OUTPUT_MAX + 1], err[OUTPUT_MAX + 1];
    size_t length;
    int status;

    if (!parse_arguments(pamh, argc, argv, "login allowed without the lockwipe check", &lockwipectl, &socket))
        return PAM_SUCCESS;
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || user == NULL || *(const char *)user == '\0') {
        pam_syslog(pamh, LOG_WARNING, "login allowed without the lockwipe check: PAM_USER is not set");
        return PAM_SUCCESS;
    }
    if (pam_get_item(pamh, PAM_SERVICE, &service) != PAM_SUCCESS)
        service = NULL;
    status = run_lockwipectl(lockwipectl, socket, "pam-account", "account", user, service, -1, out, err,
                             ACCOUNT_TIMEOUT_MS, &why);
    log_lines(pamh, LOG_NOTICE, lockwipectl, err);
    /* One message, without its last newline. */
    length = strlen(out);
    while (length > 0 && out[length - 1] == '\n')
        out[--length] = '\0';

    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        if (length > 0 && !(flags & PAM_SILENT))
            pam_info(pamh, "%s", out);
        return PAM_SUCCESS;
    }
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1) {
        /* lockwipectl said why in syslog itself. */
        if (length > 0 && !(flags & PAM_SILENT))
            pam_error(pamh, "%s", out);
        return PAM_PERM_DENIED;
    }
    if (status < 0)
        pam_syslog(pamh, LOG_WARNING, "login of %s allowed without the lockwipe check: %s pam-account: %s",
                   (const char *)user, lockwipectl, why);
    else if (WIFSIGNALED(status))
        pam_syslog(pamh, LOG_WARNING,
                   "login of %s allowed without the lockwipe check: %s pam-account was killed by signal %d",
                   (const char *)user, lockwipectl, WTERMSIG(status));
    else
        pam_syslog(pamh, LOG_WARNING,
                   "login of %s allowed without the lockwipe check: %s pam-account exited with status %d",
                   (const char *)user, lockwipectl, WEXITSTATUS(status));
    return PAM_SUCCESS;
}
