/*
 * pam_lockwipe: the lift at login's PAM auth module. pam-auth-update --enable lockwipe
 * puts "auth optional pam_lockwipe.so" into common-auth, after the module that checks
 * the password (an Additional module: it runs only when the login was accepted).
 *
 * It hands the password the auth stack already holds (PAM_AUTHTOK) to
 * `lockwipectl pam-auth`, which hands it to lockwiped (LiftAtLogin). When there is no
 * PAM_AUTHTOK (the login needed no password: nullok, a fingerprint, a smartcard) it does
 * nothing and never prompts, as pam_fscrypt does. pam_exec expose_authtok, which it
 * replaces, asked for a "Password: " in that case, checked by nobody, and left the answer
 * in PAM_AUTHTOK for the modules after it (docs/security.md, issue 40 finding 7).
 *
 * It never decides a login: every path returns PAM_IGNORE, which libpam leaves out of
 * the stack's result whatever the control flag.
 *
 * Arguments (both optional):
 *   lockwipectl=PATH   the lockwipectl to run, an absolute path (default /usr/bin/lockwipectl)
 *   socket=PATH        passed on as lockwipectl --socket PATH
 *
 * The command runs as pam_exec seteuid ran it: with the effective user ID as its real
 * one too (root under a setuid program such as su), its standard input a pipe holding
 * the password and a NUL, standard output and error /dev/null, no other descriptors, no
 * shell, and an environment of its own: PAM_USER, PAM_TYPE=auth, PAM_SERVICE and PATH.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#define PAM_SM_AUTH
#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define DEFAULT_LOCKWIPECTL "/usr/bin/lockwipectl"

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

/* The child between fork and exec: only async-signal-safe calls. */
static void exec_child(int password_fd, const char *path, char *const argv[], char *const envp[])
{
    sigset_t none;
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

    /* Both above 2 first: in a program that closed its standard descriptors either may be
     * one of them, and dup2 onto itself would keep its close-on-exec flag. */
    if (null_fd < 0 || (password_fd = fcntl(password_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
        (null_fd = fcntl(null_fd, F_DUPFD_CLOEXEC, 3)) < 0)
        _exit(127);
    if (dup2(password_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 || dup2(null_fd, STDERR_FILENO) < 0)
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

static void run(pam_handle_t *pamh, const char *lockwipectl, const char *socket, const char *user,
                const char *service, const char *password)
{
    char *env_user = NULL, *env_service = NULL;
    char env_type[] = "PAM_TYPE=auth", env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char *argv[5], *envp[5];
    int argc = 0, fds[2], status;
    pid_t pid;

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

    if (asprintf(&env_user, "PAM_USER=%s", user) < 0)
        env_user = NULL; /* undefined after a failure */
    if (asprintf(&env_service, "PAM_SERVICE=%s", service ? service : "") < 0)
        env_service = NULL;
    if (env_user == NULL || env_service == NULL) {
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: out of memory");
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
    argv[argc++] = (char *)"pam-auth";
    argv[argc] = NULL;

    pid = fork();
    if (pid < 0) {
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: fork: %m");
        goto out;
    }
    if (pid == 0)
        exec_child(fds[0], lockwipectl, argv, envp);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = 0; /* ECHILD: the program ignores SIGCHLD; the child is gone unseen */
            break;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: could not run %s", lockwipectl);
    else if (WIFSIGNALED(status))
        pam_syslog(pamh, LOG_WARNING, "the lock was not lifted at login: %s pam-auth was killed by signal %d",
                   lockwipectl, WTERMSIG(status));
out:
    close(fds[0]);
    free(env_user);
    free(env_service);
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
    const char *lockwipectl = DEFAULT_LOCKWIPECTL, *socket = NULL;
    const void *password = NULL, *user = NULL, *service = NULL;
    (void)flags;

    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "lockwipectl=", 12) == 0 && argv[i][12] == '/') {
            lockwipectl = argv[i] + 12;
        } else if (strncmp(argv[i], "socket=", 7) == 0 && argv[i][7] != '\0') {
            socket = argv[i] + 7;
        } else {
            pam_syslog(pamh, LOG_ERR,
                       "the lock is not lifted at login: the PAM configuration gives pam_lockwipe.so '%s'; "
                       "it takes lockwipectl=/ABSOLUTE/PATH and socket=PATH",
                       argv[i]);
            return PAM_IGNORE;
        }
    }
    /* No password in the stack: nothing to hand on, and nobody to ask. */
    if (pam_get_item(pamh, PAM_AUTHTOK, &password) != PAM_SUCCESS || password == NULL ||
        *(const char *)password == '\0')
        return PAM_IGNORE;
    /* PAM_USER as it is (pam_get_user could prompt). */
    if (pam_get_item(pamh, PAM_USER, &user) != PAM_SUCCESS || user == NULL || *(const char *)user == '\0')
        return PAM_IGNORE;
    if (pam_get_item(pamh, PAM_SERVICE, &service) != PAM_SUCCESS)
        service = NULL;
    run(pamh, lockwipectl, socket, user, service, password);
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
