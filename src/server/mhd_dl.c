/* mhd_dl.c - GNU libmicrohttpd, loaded when `needle serve` starts its daemon
 * instead of when any needle command starts.
 *
 * Linked into build/needle, the library and what it pulls in (GnuTLS, nettle,
 * p11-kit, gmp, libunistring, ...) were mapped and initialised by every
 * command: 2.6 MB of resident memory (4.6 vs 2.0 MB before a model is
 * loaded) that `needle run` and `needle bench` never use.  The functions
 * below take the library's names; the first MHD_start_daemon opens
 * libmicrohttpd.so.12 with dlopen and resolves the real ones, and every call
 * forwards to them.  The others are only called with a daemon running. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include <microhttpd.h>

#define MHD_SONAME "libmicrohttpd.so.12"

static struct {
    struct MHD_Daemon *(*start_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *, MHD_AccessHandlerCallback,
                                   void *, va_list);
    void (*stop)(struct MHD_Daemon *);
    const char *(*lookup)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
    enum MHD_Result (*queue)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    struct MHD_Response *(*from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
    void (*destroy)(struct MHD_Response *);
    enum MHD_Result (*add_header)(struct MHD_Response *, const char *, const char *);
    const union MHD_ConnectionInfo *(*conn_info)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
    const union MHD_DaemonInfo *(*daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...);
    int ok;
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;

/* dlsym returns void *; the copy into a function pointer is how POSIX says to use it */
#define RESOLVE(field, name) \
    do { \
        void *sym = dlsym(h, name); \
        if (!sym) { \
            fprintf(stderr, "needle serve: %s has no %s\n", MHD_SONAME, name); \
            return; \
        } \
        *(void **)&mhd.field = sym; \
    } while (0)

static void mhd_load(void)
{
    void *h = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "needle serve: cannot load %s (%s); install libmicrohttpd (Debian: libmicrohttpd12)\n",
                MHD_SONAME, dlerror());
        return;
    }
    RESOLVE(start_va, "MHD_start_daemon_va");
    RESOLVE(stop, "MHD_stop_daemon");
    RESOLVE(lookup, "MHD_lookup_connection_value");
    RESOLVE(queue, "MHD_queue_response");
    RESOLVE(from_buffer, "MHD_create_response_from_buffer");
    RESOLVE(destroy, "MHD_destroy_response");
    RESOLVE(add_header, "MHD_add_response_header");
    RESOLVE(conn_info, "MHD_get_connection_info");
    RESOLVE(daemon_info, "MHD_get_daemon_info");
    mhd.ok = 1;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls,
                                    MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    pthread_once(&mhd_once, mhd_load);
    if (!mhd.ok) return NULL;
    va_list ap;
    va_start(ap, dh_cls);
    struct MHD_Daemon *d = mhd.start_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    va_end(ap);
    return d;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon) { mhd.stop(daemon); }

const char *MHD_lookup_connection_value(struct MHD_Connection *connection, enum MHD_ValueKind kind, const char *key)
{
    return mhd.lookup(connection, kind, key);
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
                                   struct MHD_Response *response)
{
    return mhd.queue(connection, status_code, response);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode)
{
    return mhd.from_buffer(size, buffer, mode);
}

void MHD_destroy_response(struct MHD_Response *response) { mhd.destroy(response); }

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header, const char *content)
{
    return mhd.add_header(response, header, content);
}

/* needle asks only for information that takes no extra arguments */
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *connection,
                                                        enum MHD_ConnectionInfoType info_type, ...)
{
    return mhd.conn_info(connection, info_type);
}

const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *daemon, enum MHD_DaemonInfoType info_type, ...)
{
    return mhd.daemon_info(daemon, info_type);
}
