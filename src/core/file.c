/* file.c - mapping files for reading, atomic temp+rename for writing. */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

int nd_map_file(const char *path, nd_mapping *out, needle_error *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return nd_errorf(err, NEEDLE_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return nd_errorf(err, NEEDLE_EIO, "%s: not a regular file", path);
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

int nd_atomic_open(nd_atomic_file *af, const char *path, needle_error *err)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return nd_errorf(err, NEEDLE_EINVAL, "%s: path too long", path);
    strcpy(af->path, path);
    snprintf(af->tmp_path, sizeof af->tmp_path, "%s.tmp.%ld", path, (long)getpid());
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) return nd_errorf(err, NEEDLE_EIO, "%s: cannot create: %s", af->tmp_path, strerror(errno));
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
        remove(af->tmp_path);
        return nd_errorf(err, NEEDLE_EIO, "%s: write failed: %s", af->path, strerror(saved));
    }
    if (rename(af->tmp_path, af->path) != 0) {
        saved = errno;
        remove(af->tmp_path);
        return nd_errorf(err, NEEDLE_EIO, "%s: cannot rename into place: %s", af->path, strerror(saved));
    }
    return 0;
}

void nd_atomic_abort(nd_atomic_file *af)
{
    if (af->fp) {
        fclose(af->fp);
        af->fp = NULL;
        remove(af->tmp_path);
    }
}

int nd_read_file(const char *path, char **out, size_t *out_len, needle_error *err)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return nd_errorf(err, NEEDLE_EIO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) { fclose(fp); return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); }
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); fclose(fp); return nd_errorf(err, NEEDLE_ENOMEM, "%s: out of memory", path); }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, fp);
        len += n;
        if (n == 0) break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) { free(buf); return nd_errorf(err, NEEDLE_EIO, "%s: read error", path); }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return 0;
}
