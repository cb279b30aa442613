/* test_file.c - atomic writes (unique temp per call, no symlink following, stale
 * temp cleanup) and the bounded regular-file reader (FIFOs, devices, directories
 * refused without blocking; size limits stated). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/file.h"
#include "core/file_kind.h"

static char dir[256];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/needle_test_file.%ld", (long)getpid());
    mkdir(dir, 0700);
}

static void remove_dir(void)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[600];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int count_entries(const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

/* ---- concurrent writers on one path ---- */

#define WRITERS 8
#define ROUNDS 40
#define PAYLOAD 20000

static char target[600];
static int writer_failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void *writer(void *arg)
{
    int id = (int)(long)arg;
    char *buf = malloc(PAYLOAD);
    memset(buf, 'A' + id, PAYLOAD);
    for (int r = 0; r < ROUNDS; r++) {
        nd_atomic_file af;
        needle_error err = {0};
        int bad = nd_atomic_open(&af, target, &err);
        if (!bad) {
            /* write in pieces so writers interleave inside one file if they share it */
            for (int k = 0; k < PAYLOAD; k += 1000) fwrite(buf + k, 1, 1000, af.fp), fflush(af.fp);
            bad = nd_atomic_commit(&af, &err);
        }
        if (bad) {
            pthread_mutex_lock(&fail_lock);
            writer_failures++;
            pthread_mutex_unlock(&fail_lock);
        }
    }
    free(buf);
    return NULL;
}

static void test_atomic_concurrent_writers(void)
{
    snprintf(target, sizeof target, "%s/index.bin", dir);
    pthread_t th[WRITERS];
    writer_failures = 0;
    for (long i = 0; i < WRITERS; i++) pthread_create(&th[i], NULL, writer, (void *)i);
    for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
    CHECKF(writer_failures == 0, "%d of %d saves failed", writer_failures, WRITERS * ROUNDS);
    char *text = NULL;
    size_t len = 0;
    needle_error err = {0};
    CHECK(nd_read_file(target, &text, &len, &err) == 0);
    CHECKF(len == PAYLOAD, "final file has %zu bytes, want %d", len, PAYLOAD);
    int uniform = text && len > 0;
    for (size_t i = 1; uniform && i < len; i++) uniform = text[i] == text[0];
    CHECKF(uniform, "the final file mixes two writers' bytes");
    free(text);
    CHECKF(count_entries("index.bin.tmp.") == 0, "temp files left behind");
}

static void test_atomic_does_not_follow_planted_symlink(void)
{
    char victim[600], out[600], planted[700];
    snprintf(victim, sizeof victim, "%s/victim.txt", dir);
    snprintf(out, sizeof out, "%s/out.cact", dir);
    FILE *f = fopen(victim, "w");
    fputs("precious", f);
    fclose(f);
    /* the old scheme's predictable name, and a guess at the new one's prefix */
    snprintf(planted, sizeof planted, "%s.tmp.%ld", out, (long)getpid());
    CHECK(symlink(victim, planted) == 0);
    nd_atomic_file af;
    needle_error err = {0};
    CHECK(nd_atomic_open(&af, out, &err) == 0);
    CHECKF(strcmp(af.tmp_path, planted) != 0, "temp name %s is predictable", af.tmp_path);
    fputs("new contents", af.fp);
    CHECK(nd_atomic_commit(&af, &err) == 0);
    char *text = NULL;
    CHECK(nd_read_file(victim, &text, NULL, &err) == 0);
    CHECKF(text && !strcmp(text, "precious"), "the symlink's target was overwritten: '%s'", text ? text : "");
    free(text);
    CHECK(nd_read_file(out, &text, NULL, &err) == 0);
    CHECK(text && !strcmp(text, "new contents"));
    free(text);
    unlink(planted);
}

static void test_atomic_cleans_stale_temps_of_dead_processes(void)
{
    char out[600], dead_new[800], dead_old[800], live[800], other[800];
    snprintf(out, sizeof out, "%s/model.cact", dir);
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0); /* child's pid is now (almost surely) free */
    snprintf(dead_new, sizeof dead_new, "%s.tmp.%ld.ab12cd34", out, (long)child);
    snprintf(dead_old, sizeof dead_old, "%s.tmp.%ld", out, (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld.zz99zz99", out, (long)getppid());
    snprintf(other, sizeof other, "%s.tmp.%ld.notours!", out, (long)child);
    const char *all[4] = {dead_new, dead_old, live, other};
    for (int i = 0; i < 4; i++) {
        FILE *f = fopen(all[i], "w");
        fputs("x", f);
        fclose(f);
    }
    nd_atomic_file af;
    needle_error err = {0};
    CHECK(nd_atomic_open(&af, out, &err) == 0);
    nd_atomic_abort(&af);
    CHECKF(access(dead_new, F_OK) != 0, "stale temp of a dead pid kept");
    CHECKF(access(dead_old, F_OK) != 0, "old-scheme stale temp of a dead pid kept");
    CHECKF(access(live, F_OK) == 0, "temp of a live process removed");
    CHECKF(access(other, F_OK) == 0, "a file outside the naming scheme removed");
    unlink(live);
    unlink(other);
}

/* ---- bounded reader ---- */

static void test_reader_refuses_fifo_without_blocking(void)
{
    char fifo[600];
    snprintf(fifo, sizeof fifo, "%s/pipe", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    /* a watchdog: if open() blocks, the alarm kills the test (a crash counts as failure) */
    alarm(10);
    needle_error err = {0};
    char *text = NULL;
    CHECK(nd_read_file(fifo, &text, NULL, &err) != 0);
    CHECKF(strstr(err.message, "FIFO") && strstr(err.message, fifo), "message: %s", err.message);
    nd_mapping m;
    CHECK(nd_map_file(fifo, &m, &err) != 0);
    CHECKF(strstr(err.message, "FIFO"), "message: %s", err.message);
    alarm(0);
    unlink(fifo);
}

static void test_reader_refuses_devices_and_directories(void)
{
    needle_error err = {0};
    char *text = NULL;
    CHECK(nd_read_file_max("/dev/zero", ND_LIMIT_TOOLS_BYTES, "tools file", &text, NULL, &err) != 0);
    CHECKF(strstr(err.message, "/dev/zero") && strstr(err.message, "device"), "message: %s", err.message);
    CHECK(nd_read_file(dir, &text, NULL, &err) != 0);
    CHECKF(strstr(err.message, "directory"), "message: %s", err.message);
}

static void test_reader_states_size_limit(void)
{
    char big[600];
    snprintf(big, sizeof big, "%s/big.json", dir);
    FILE *f = fopen(big, "w");
    for (int i = 0; i < 3000; i++) fputs("0123456789", f);
    fclose(f);
    needle_error err = {0};
    char *text = NULL;
    size_t len = 0;
    CHECK(nd_read_file_max(big, 1024, "tools file", &text, &len, &err) == NEEDLE_ELIMIT);
    CHECKF(strstr(err.message, "1024 bytes") && strstr(err.message, "tools file") && strstr(err.message, big),
           "message: %s", err.message);
    CHECK(nd_read_file_max(big, 30000, "tools file", &text, &len, &err) == 0 && len == 30000);
    free(text);
    unlink(big);
}

static void test_file_kind_sniffer(void)
{
    const uint8_t cact[16] = {0x83, 0x2A, 0xE1, 0x05};
    CHECK(nd_file_kind_of(cact, 16) == ND_KIND_CACT);
    const uint8_t st[16] = {4, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    CHECK(nd_file_kind_of(st, 12) == ND_KIND_SAFETENSORS);
    CHECK(nd_file_kind_of((const uint8_t *)"  {\"a\":1}", 9) == ND_KIND_JSON);
    CHECK(nd_file_kind_of((const uint8_t *)"hello world\n", 12) == ND_KIND_TEXT);
    CHECK(nd_file_kind_of(NULL, 0) == ND_KIND_EMPTY);
    CHECK(strstr(nd_file_kind_phrase(ND_KIND_CACT), ".cact") != NULL);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    make_dir();
    RUN(test_atomic_concurrent_writers);
    RUN(test_atomic_does_not_follow_planted_symlink);
    RUN(test_atomic_cleans_stale_temps_of_dead_processes);
    RUN(test_reader_refuses_fifo_without_blocking);
    RUN(test_reader_refuses_devices_and_directories);
    RUN(test_reader_states_size_limit);
    RUN(test_file_kind_sniffer);
    remove_dir();
    return check_summary();
}
