/*
 * holdcall_shim.c: an LD_PRELOAD test double that puts faults under a running Holdcall
 * daemon without any switch in the product. It owns the fault evidence of issue 16 that needs
 * the real SQLite's syncs or the real daemon's socket writes: EIO on a sync, a sync that never
 * returns, a decision answered for another seq, and a copy of each file at each sync (the
 * power-loss model, tests/power.rs). It must never change anything unless its control file
 * says so, never modify a caller's memory, and never crash its host: on any failure of its own
 * it passes the call through (except that in `eio` mode a sync still fails).
 *
 * Built by the tests (tests/common/shim.rs):
 *   cc -shared -fPIC -O2 -o holdcall_shim.so tools/shim/holdcall_shim.c -ldl
 *
 * Environment (read on each intercepted call; nothing is cached but the real functions):
 *   HOLDCALL_SHIM_CONTROL   a file whose first word is the mode; unset: the shim is inert
 *   HOLDCALL_SHIM_LOG       a file the shim appends lines to (O_APPEND, one write per line)
 *   HOLDCALL_SHIM_SNAPSHOTS the directory `snap` copies files into
 *   HOLDCALL_SHIM_FILES     comma-separated basenames to track (default: *.db and *.db-wal)
 *
 * Modes (the control file's first word, re-read on every intercepted call):
 *   off / missing / empty  pass through
 *   eio        fsync/fdatasync of a tracked file fails with EIO, the real one is not called;
 *              logs `eio <pid> <basename>`
 *   pause      fsync/fdatasync of a tracked file logs `paused <pid>` and blocks until the
 *              process is killed
 *   seq_shift  a write to an AF_UNIX socket whose line holds "kind":"decision" goes out with
 *              the last digit of its "seq": number turned d -> (d+1)%10; logs
 *              `shifted <pid> <old> <new>`
 *   snap       after a tracked file's real sync returned 0, its whole content is copied to
 *              SNAPSHOTS/<n>-<basename> (temp file + rename), then `sync <n> <basename>` is
 *              logged; n is unique across processes (the log's line count, under flock)
 *
 * SQLite (os_unix.c) calls fdatasync when HAVE_FDATASYNC is set and fsync otherwise; both are
 * wrapped, with syncfs and sync_file_range passed through untouched (SQLite does not use them).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum mode { MODE_OFF, MODE_EIO, MODE_PAUSE, MODE_SEQ_SHIFT, MODE_SNAP };

typedef int (*sync_fn)(int);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);

/* Set by the shim while it works, so its own calls never re-enter it. */
static __thread int in_shim;

static const char DECISION[] = "\"kind\":\"decision\"";
static const char SEQ[] = "\"seq\":";

/* The next definition of each wrapped function after this library: libc's. Kept once found
 * (it never changes while the process lives); two threads racing store the same value. */
enum which { R_FSYNC, R_FDATASYNC, R_WRITE, R_WRITEV, R_SEND, R_SENDMSG, R_COUNT };
static const char *const NAMES[R_COUNT] = {"fsync", "fdatasync", "write", "writev", "send",
                                           "sendmsg"};
static void *found[R_COUNT];

static void *real(enum which w) {
    void *f = __atomic_load_n(&found[w], __ATOMIC_ACQUIRE);
    if (f == NULL) {
        f = dlsym(RTLD_NEXT, NAMES[w]);
        __atomic_store_n(&found[w], f, __ATOMIC_RELEASE);
    }
    return f;
}

static ssize_t raw_write(int fd, const void *buf, size_t len) {
    write_fn w = (write_fn)real(R_WRITE);
    if (w == NULL) {
        errno = ENOSYS;
        return -1;
    }
    return w(fd, buf, len);
}

/* The mode in the control file now; MODE_OFF when there is none or it cannot be read. */
static enum mode current_mode(void) {
    const char *path = getenv("HOLDCALL_SHIM_CONTROL");
    if (path == NULL || *path == '\0') return MODE_OFF;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MODE_OFF;
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return MODE_OFF;
    buf[n] = '\0';
    char *w = buf;
    while (*w == ' ' || *w == '\t' || *w == '\n' || *w == '\r') w++;
    size_t len = strcspn(w, " \t\r\n");
    w[len] = '\0';
    if (strcmp(w, "eio") == 0) return MODE_EIO;
    if (strcmp(w, "pause") == 0) return MODE_PAUSE;
    if (strcmp(w, "seq_shift") == 0) return MODE_SEQ_SHIFT;
    if (strcmp(w, "snap") == 0) return MODE_SNAP;
    return MODE_OFF;
}

/* Appends one line to the log in one write (O_APPEND: lines of several processes never mix). */
static void log_line(const char *line) {
    const char *path = getenv("HOLDCALL_SHIM_LOG");
    if (path == NULL || *path == '\0') return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    (void)raw_write(fd, line, strlen(line));
    close(fd);
}

/* Whether `base` is one of the files to track. */
static int tracked_name(const char *base) {
    const char *list = getenv("HOLDCALL_SHIM_FILES");
    if (list == NULL) {
        size_t n = strlen(base);
        return (n > 3 && strcmp(base + n - 3, ".db") == 0) ||
               (n > 7 && strcmp(base + n - 7, ".db-wal") == 0);
    }
    size_t blen = strlen(base);
    const char *p = list;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        if (len == blen && len > 0 && strncmp(p, base, len) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

/* Whether `fd` is a regular file to track; its basename goes into `base` (size PATH_MAX). */
static int tracked_fd(int fd, char *base) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0; /* directories pass through */
    char link[64];
    char path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = '\0';
    const char *slash = strrchr(path, '/');
    const char *b = slash != NULL ? slash + 1 : path;
    if (!tracked_name(b)) return 0;
    snprintf(base, PATH_MAX, "%s", b);
    return 1;
}

/* Blocks this thread until the process is killed. */
static void block_forever(void) {
    for (;;) pause();
}

/* Copies the whole content of `fd` into `out` (a file opened for writing). 0 on success. */
static int copy_content(int fd, int out) {
    char buf[65536];
    off_t at = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        ssize_t done = 0;
        while (done < n) {
            ssize_t w = raw_write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) return -1;
            done += w;
        }
        at += n;
    }
}

/* The number of lines in the file open at `fd`. */
static long count_lines(int fd) {
    char buf[65536];
    long lines = 0;
    off_t at = 0;
    for (;;) {
        ssize_t n = pread(fd, buf, sizeof buf, at);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return lines;
        for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
        at += n;
    }
}

/* `snap`: copies the just-synced file to SNAPSHOTS/<n>-<base> and logs `sync <n> <base>`, all
 * under an exclusive flock on the log, so n (the log's line count) is unique across processes.
 * Best effort: a failure leaves no snapshot and no line, and the sync's result stands. */
static void snapshot(int fd, const char *base) {
    const char *log = getenv("HOLDCALL_SHIM_LOG");
    const char *dir = getenv("HOLDCALL_SHIM_SNAPSHOTS");
    if (log == NULL || dir == NULL || *log == '\0' || *dir == '\0') return;
    int lfd = open(log, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0) return;
    while (flock(lfd, LOCK_EX) != 0) {
        if (errno != EINTR) {
            close(lfd);
            return;
        }
    }
    long n = count_lines(lfd);
    char tmp[PATH_MAX];
    char dst[PATH_MAX];
    int tl = snprintf(tmp, sizeof tmp, "%s/.%ld-%s.tmp", dir, n, base);
    int dl = snprintf(dst, sizeof dst, "%s/%ld-%s", dir, n, base);
    int fits = tl > 0 && dl > 0 && (size_t)tl < sizeof tmp && (size_t)dl < sizeof dst;
    int out = fits ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    if (out >= 0) {
        int ok = copy_content(fd, out) == 0;
        if (!ok && errno == EBADF) {
            /* Opened write-only: read the same file through a descriptor of our own. */
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            int rfd = open(link, O_RDONLY | O_CLOEXEC);
            if (rfd >= 0 && ftruncate(out, 0) == 0 && lseek(out, 0, SEEK_SET) == 0)
                ok = copy_content(rfd, out) == 0;
            if (rfd >= 0) close(rfd);
        }
        close(out);
        if (ok && rename(tmp, dst) == 0) {
            char line[PATH_MAX + 64];
            snprintf(line, sizeof line, "sync %ld %s\n", n, base);
            (void)raw_write(lfd, line, strlen(line));
        } else {
            unlink(tmp);
        }
    }
    flock(lfd, LOCK_UN);
    close(lfd);
}

/* fsync and fdatasync share this: `name` is which one was called. */
static int wrap_sync(enum which name, int fd) {
    sync_fn f = (sync_fn)real(name);
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (in_shim) return f(fd);
    in_shim = 1;
    int saved = errno;
    char base[PATH_MAX];
    enum mode m = MODE_OFF;
    int tracked = tracked_fd(fd, base);
    if (tracked) m = current_mode();
    errno = saved;
    int rc;
    switch (m) {
    case MODE_EIO: {
        char line[PATH_MAX + 64];
        snprintf(line, sizeof line, "eio %ld %s\n", (long)getpid(), base);
        log_line(line);
        errno = EIO;
        rc = -1;
        break;
    }
    case MODE_PAUSE: {
        char line[64];
        snprintf(line, sizeof line, "paused %ld\n", (long)getpid());
        log_line(line);
        block_forever();
        rc = -1;
        break;
    }
    case MODE_SNAP:
        rc = f(fd);
        if (rc == 0) {
            snapshot(fd, base);
            errno = saved;
        }
        break;
    default:
        rc = f(fd);
        break;
    }
    in_shim = 0;
    return rc;
}

int fsync(int fd) { return wrap_sync(R_FSYNC, fd); }
int fdatasync(int fd) { return wrap_sync(R_FDATASYNC, fd); }

/* Whether `fd` is an AF_UNIX socket (asked of the kernel each time: fds are reused). */
static int unix_socket(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
    int domain = -1;
    socklen_t len = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return 0;
    return domain == AF_UNIX;
}

/* In `buf` (a private copy), turns the last digit of the first "seq": number of every line
 * holding "kind":"decision" d -> (d+1)%10. Returns how many it changed. */
static int shift_seqs(char *buf, size_t len) {
    int changed = 0;
    size_t start = 0;
    while (start < len) {
        char *nl = memchr(buf + start, '\n', len - start);
        size_t end = nl != NULL ? (size_t)(nl - buf) : len;
        char *line = buf + start;
        size_t llen = end - start;
        if (memmem(line, llen, DECISION, sizeof DECISION - 1) != NULL) {
            char *s = memmem(line, llen, SEQ, sizeof SEQ - 1);
            if (s != NULL) {
                char *d = s + sizeof SEQ - 1;
                char *stop = line + llen;
                char *first = d;
                while (d < stop && *d >= '0' && *d <= '9') d++;
                if (d > first) {
                    char old = d[-1];
                    d[-1] = (char)('0' + (old - '0' + 1) % 10);
                    char msg[96];
                    snprintf(msg, sizeof msg, "shifted %ld %c %c\n", (long)getpid(), old, d[-1]);
                    log_line(msg);
                    changed++;
                }
            }
        }
        start = end + 1;
    }
    return changed;
}

/* Whether a write of these bytes to `fd` is one `seq_shift` rewrites. Cheapest test first:
 * nearly every write of the process holds no decision. */
static int to_shift(int fd, const void *buf, size_t len) {
    if (buf == NULL || len < sizeof DECISION - 1) return 0;
    if (memmem(buf, len, DECISION, sizeof DECISION - 1) == NULL) return 0;
    return unix_socket(fd) && current_mode() == MODE_SEQ_SHIFT;
}

/* A private copy of `buf` with its seqs shifted, or NULL (then pass the original through). */
static char *shifted_copy(const void *buf, size_t len) {
    char *copy = malloc(len);
    if (copy == NULL) return NULL;
    memcpy(copy, buf, len);
    shift_seqs(copy, len);
    return copy;
}

ssize_t write(int fd, const void *buf, size_t len) {
    write_fn f = (write_fn)real(R_WRITE);
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (in_shim) return f(fd, buf, len);
    in_shim = 1;
    int saved = errno;
    char *copy = to_shift(fd, buf, len) ? shifted_copy(buf, len) : NULL;
    errno = saved;
    ssize_t rc = f(fd, copy != NULL ? copy : buf, len);
    free(copy);
    in_shim = 0;
    return rc;
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
    send_fn f = (send_fn)real(R_SEND);
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (in_shim) return f(fd, buf, len, flags);
    in_shim = 1;
    int saved = errno;
    char *copy = to_shift(fd, buf, len) ? shifted_copy(buf, len) : NULL;
    errno = saved;
    ssize_t rc = f(fd, copy != NULL ? copy : buf, len, flags);
    free(copy);
    in_shim = 0;
    return rc;
}

/* The iovecs' bytes in one new buffer (NULL when empty or out of memory); its length in *len. */
static char *flatten(const struct iovec *iov, int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += iov[i].iov_len;
    *len = total;
    if (total == 0) return NULL;
    char *buf = malloc(total);
    if (buf == NULL) return NULL;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len > 0) memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    return buf;
}

/* For writev and sendmsg: a flattened, shifted copy of the iovecs when `seq_shift` applies to
 * them, else NULL (pass the caller's iovecs through). */
static char *shifted_iov(int fd, const struct iovec *iov, int n, size_t *len) {
    if (iov == NULL || n <= 0) return NULL;
    char *flat = flatten(iov, n, len);
    if (flat == NULL) return NULL;
    if (!to_shift(fd, flat, *len)) {
        free(flat);
        return NULL;
    }
    shift_seqs(flat, *len);
    return flat;
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    writev_fn f = (writev_fn)real(R_WRITEV);
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (in_shim) return f(fd, iov, n);
    in_shim = 1;
    int saved = errno;
    size_t len = 0;
    char *flat = shifted_iov(fd, iov, n, &len);
    errno = saved;
    ssize_t rc;
    if (flat != NULL) {
        /* Same bytes count as the caller's iovecs, so a full or partial count means the same. */
        struct iovec one = {.iov_base = flat, .iov_len = len};
        rc = f(fd, &one, 1);
        free(flat);
    } else {
        rc = f(fd, iov, n);
    }
    in_shim = 0;
    return rc;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    sendmsg_fn f = (sendmsg_fn)real(R_SENDMSG);
    if (f == NULL) {
        errno = ENOSYS;
        return -1;
    }
    if (in_shim || msg == NULL) return f(fd, msg, flags);
    in_shim = 1;
    int saved = errno;
    size_t len = 0;
    char *flat = shifted_iov(fd, msg->msg_iov, (int)msg->msg_iovlen, &len);
    errno = saved;
    ssize_t rc;
    if (flat != NULL) {
        /* The caller's header (address, control data such as passed fds, flags) with one iovec. */
        struct msghdr copy = *msg;
        struct iovec one = {.iov_base = flat, .iov_len = len};
        copy.msg_iov = &one;
        copy.msg_iovlen = 1;
        rc = f(fd, &copy, flags);
        free(flat);
    } else {
        rc = f(fd, msg, flags);
    }
    in_shim = 0;
    return rc;
}
