#include "tests/unit/fc_test.h"

#include "config/load.h"
#include "storage/store.h"

#include <dirent.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint8_t *fc_test_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

const char *fc_test_corpus(void)
{
    const char *dir = getenv("FLAMECOL_CORPUS");
    return dir ? dir : "../shared/corpus";
}

struct fc_node *fc_test_yaml(struct fc_arena *a, const char *text, struct fc_diag *diag)
{
    return fc_config_load_string(a, "test.yaml", text, strlen(text), diag);
}

int fc_test_diag_has(const struct fc_diag *d, const char *needle)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strstr(d->entries[i].text, needle) != NULL) {
            return 1;
        }
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

size_t fc_test_corpus_files(char (*names)[256], size_t max)
{
    DIR *d = opendir(fc_test_corpus());
    struct dirent *e;
    size_t n = 0;

    while (d != NULL && (e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        if (len > 6 && len < 256 && strcmp(e->d_name + len - 6, ".pb.gz") == 0) {
            memcpy(names[n++], e->d_name, len + 1);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    qsort(names, n, sizeof(names[0]), by_name);
    return n;
}

int64_t fc_test_rebuild_max;

struct fc_store *fc_test_store_open(const char *dir, const char *name)
{
    char sub[256];
    struct fc_store_options o = {0};
    struct fc_store *s;
    struct fc_error err = {0};

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    o.path = sub;
    o.sync = FC_SYNC_NONE;
    o.rebuild_max_bytes = fc_test_rebuild_max;
    if (fc_store_open(&o, &s, &err) != FC_OK) {
        fprintf(stderr, "cannot open the store %s: %s\n", sub, err.msg);
        abort();
    }
    return s;
}

uint32_t fc_test_store_format(const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta;
    static char format_key[] = "\0format";
    MDB_val k = {7, format_key}, v;
    uint32_t version = 0;

    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 32) != 0 ||
        mdb_env_open(env, path, MDB_RDONLY, 0644) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0) {
        fprintf(stderr, "cannot read the store %s\n", path);
        abort();
    }
    if (mdb_dbi_open(txn, "meta", 0, &meta) == 0 && mdb_get(txn, meta, &k, &v) == 0 &&
        v.mv_size == 4) {
        memcpy(&version, v.mv_data, 4);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return version;
}

int fc_test_tmpdir(char *dir, size_t size, const char *prefix)
{
    if ((size_t)snprintf(dir, size, "/tmp/%s-XXXXXX", prefix) >= size) {
        return -1;
    }
    return mkdtemp(dir) == NULL ? -1 : 0;
}

int fc_test_rmdir(const char *dir)
{
    char cmd[512];

    if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) >= sizeof(cmd)) {
        return -1;
    }
    return system(cmd) == 0 ? 0 : -1;
}
