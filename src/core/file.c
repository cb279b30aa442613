/* file.c - bounded non-blocking readers, mapping, atomic temp+rename writes. */
#include "core/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"

static const char *mode_phrase(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

int nd_open_regular(const char *path, needle_error *err)
{
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        nd_errorf(err, NEEDLE_EIO, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        nd_errorf(err, NEEDLE_EIO, "%s: cannot stat: %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        nd_errorf(err, NEEDLE_EIO, "%s: is %s; a regular file is needed", path, mode_phrase(st.st_mode));
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

int nd_map_file(const char *path, nd_mapping *out, needle_error *err)
{
    memset(out, 0, sizeof *out);
    int fd = nd_open_regular(path, err);
    if (fd < 0) return NEEDLE_EIO;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return nd_errorf(err, NEEDLE_EIO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return nd_errorf(err, NEEDLE_EIO, "%s: cannot map: %s", path, strerror(errno));
    out->data = p;
    out->size = (size_t)st.st_size;
    out->mapped = 1;
    return 0;
}

void nd_unmap_file(nd_mapping *m)
{
    if (m->mapped && m->data) munmap((void *)m->data, m->size);
    else free((void *)m->data);
    memset(m, 0, sizeof *m);
}

/* ---- atomic writes ---- */

/* 8 characters from [0-9a-z], different for every call in every thread: a
 * process-wide counter mixed with the clock and the pid (O_EXCL makes any
 * collision a retry, never a shared file). */
static void random_suffix(char out[9])
{
    static atomic_ulong counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)atomic_fetch_add(&counter, 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_nsec ^
                 ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 16);
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 31;
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (int i = 0; i < 8; i++) {
        out[i] = digits[x % 36];
        x /= 36;
    }
    out[8] = '\0';
}

/* Split PATH into its directory ("." when none) and base name. */
static void split_path(const char *path, char *dir, size_t dir_size, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dir_size, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dir_size, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dir_size, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* NAME is BASE.tmp.<pid> or BASE.tmp.<pid>.<8 of [0-9a-z]> (the older scheme had
 * no suffix); returns the pid, or 0 when NAME is not ours. */
static long stale_pid(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0) return 0;
    const char *p = name + bl + 5;
    long pid = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 10) pid = pid * 10 + (*p++ - '0'), digits++;
    if (!digits || pid <= 0) return 0;
    if (*p == '\0') return pid;
    if (*p++ != '.') return 0;
    for (int i = 0; i < 8; i++, p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))) return 0;
    return *p == '\0' ? pid : 0;
}

int nd_atomic_clean_stale(const char *path)
{
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    if (!*base) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = stale_pid(e->d_name, base);
        if (!pid || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(full, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}

int nd_atomic_open(nd_atomic_file *af, const char *path, needle_error *err)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return nd_errorf(err, NEEDLE_EINVAL, "%s: path too long", path);
    strcpy(af->path, path);
    nd_atomic_clean_stale(path);
    int fd = -1, e = 0;
    for (int attempt = 0; attempt < 64 && fd < 0; attempt++) {
        char sfx[9];
        random_suffix(sfx);
        snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld.%s", path, (long)getpid(), sfx);
        fd = open(af->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    if (fd < 0) return nd_errorf(err, NEEDLE_EIO, "%s: cannot create a temp file next to it: %s", path, strerror(e));
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        e = errno;
        close(fd);
        unlink(af->tmp_path);
        return nd_errorf(err, NEEDLE_EIO, "%s: cannot open the temp file: %s", path, strerror(e));
    }
    return 0;
}

int nd_atomic_commit(nd_atomic_file *af, needle_error *err)
{
    if (!af->fp) return nd_errorf(err, NEEDLE_ESTATE, "%s: not open", af->path);
    int bad = ferror(af->fp) || fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0;
    int saved = errno;
    if (fclose(af->fp) != 0) bad = 1;
    af->fp = NULL;
    if (bad) {
        unlink(af->tmp_path);
        return nd_errorf(err, NEEDLE_EIO, "%s: write failed: %s", af->path, strerror(saved));
    }
    if (rename(af->tmp_path, af->path) != 0) {
        saved = errno;
        unlink(af->tmp_path);
        return nd_errorf(err, NEEDLE_EIO, "%s: cannot rename into place: %s", af->path, strerror(saved));
    }
    /* make the rename itself durable */
    char dir[4096];
    const char *base;
    split_path(af->path, dir, sizeof dir, &base);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

void nd_atomic_abort(nd_atomic_file *af)
{
    if (af->fp) {
        fclose(af->fp);
        af->fp = NULL;
        unlink(af->tmp_path);
    }
}

/* ---- bounded whole-file reads ---- */

static void size_phrase(size_t n, char *out, size_t out_size)
{
    if (n >= ((size_t)1 << 30) && n % ((size_t)1 << 30) == 0) snprintf(out, out_size, "%zu GiB", n >> 30);
    else if (n >= ((size_t)1 << 20) && n % ((size_t)1 << 20) == 0) snprintf(out, out_size, "%zu MiB", n >> 20);
    else snprintf(out, out_size, "%zu bytes", n);
}

int nd_read_file_max(const char *path, size_t max_bytes, const char *what, char **out, size_t *out_len,
                     needle_error *err)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!what) what = "file";
    int fd = nd_open_regular(path, err);
    if (fd < 0) return NEEDLE_EIO;
    char lim[32];
    size_phrase(max_bytes, lim, sizeof lim);
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        return nd_errorf(err, NEEDLE_ELIMIT, "%s: %lld bytes, more than the %s allowed for a %s", path,
                         (long long)st.st_size, lim, what);
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len + 1 >= cap) {
            size_t ncap = cap * 2;
            if (ncap > max_bytes + 2) ncap = max_bytes + 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return nd_errorf(err, NEEDLE_EIO, "%s: read error: %s", path, strerror(e));
        }
        if (n == 0) break;
        len += (size_t)n;
        if (len > max_bytes) { /* a file that grows while we read it */
            free(buf);
            close(fd);
            return nd_errorf(err, NEEDLE_ELIMIT, "%s: more than the %s allowed for a %s", path, lim, what);
        }
    }
    close(fd);
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return 0;
}

int nd_read_file(const char *path, char **out, size_t *out_len, needle_error *err)
{
    return nd_read_file_max(path, ND_LIMIT_TEXT_BYTES, "text input", out, out_len, err);
}
