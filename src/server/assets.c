/* assets.c - the playground page, compiled into the binary.
 *
 * The files in src/server/playground/ are pulled in by the assembler's
 * .incbin (gcc and clang both support it), so there is no generated source
 * and no build step: editing a file and running make rebuilds this object
 * (the Makefile lists the files as its prerequisites).  `needle serve
 * --static DIR` serves a directory instead, for working on the page. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "server/server_internal.h"

/* Paths are relative to the repository root, where make runs the compiler. */
#define ND_ASSET(sym, file)                                                                                    \
    __asm__(".section .rodata\n.balign 16\n.local " #sym "\n" #sym ":\n.incbin \"" file "\"\n.local " #sym "_end\n" \
            #sym "_end:\n.byte 0\n.previous\n");                                                               \
    extern const char sym[], sym##_end[]

ND_ASSET(nd_asset_index_html, "src/server/playground/index.html");
ND_ASSET(nd_asset_app_js, "src/server/playground/app.js");
ND_ASSET(nd_asset_style_css, "src/server/playground/style.css");

static const struct {
    const char *path;
    const char *data, *end;
    const char *type;
} assets[] = {
    {"/", nd_asset_index_html, nd_asset_index_html_end, "text/html; charset=utf-8"},
    {"/index.html", nd_asset_index_html, nd_asset_index_html_end, "text/html; charset=utf-8"},
    {"/app.js", nd_asset_app_js, nd_asset_app_js_end, "text/javascript; charset=utf-8"},
    {"/style.css", nd_asset_style_css, nd_asset_style_css_end, "text/css; charset=utf-8"},
};

int nd_asset_find(const char *path, const char **data, size_t *len, const char **content_type)
{
    for (size_t i = 0; i < sizeof assets / sizeof assets[0]; i++) {
        if (strcmp(path, assets[i].path) != 0) continue;
        *data = assets[i].data;
        *len = (size_t)(assets[i].end - assets[i].data);
        *content_type = assets[i].type;
        return 1;
    }
    return 0;
}

static const char *type_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (!strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
    if (!strcmp(dot, ".json")) return "application/json";
    if (!strcmp(dot, ".svg")) return "image/svg+xml";
    if (!strcmp(dot, ".png")) return "image/png";
    return "application/octet-stream";
}

int nd_static_read(const char *dir, const char *path, char **data, size_t *len, const char **content_type)
{
    if (!strcmp(path, "/")) path = "/index.html";
    const char *name = path + 1;
    if (!*name || strlen(name) > 128 || name[0] == '.') return 0;
    for (const char *c = name; *c; c++) /* one plain file name: no '/', so no way out of DIR */
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '-' || *c == '_'))
            return 0;
    nd_buf p;
    nd_buf_init(&p);
    nd_buf_printf(&p, "%s/%s", dir, name);
    int fd = p.oom ? -1 : open(p.data, O_RDONLY | O_CLOEXEC);
    nd_buf_free(&p);
    if (fd < 0) return 0;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= (16 << 20) &&
        (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
            if (k <= 0) break;
            got += (size_t)k;
        }
        if (got == (size_t)st.st_size) {
            close(fd);
            *data = buf;
            *len = got;
            *content_type = type_of(name);
            return 1;
        }
    }
    free(buf);
    close(fd);
    return 0;
}
