#include "core/convert.h"

#include "core/batch.h"
#include "core/buf.h"
#include "formats/folded.h"
#include "formats/gzip.h"
#include "formats/otlp.h"
#include "formats/pprof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: flamecol convert [--from pprof|otlp|otlp-json] [--to otlp|otlp-json|pprof|folded]\n"
    "                        [--label NAME=VALUE]... FILE|-\n"
    "\n"
    "Reads one profile file (pprof gzipped or not, or an OTLP ExportProfilesServiceRequest)\n"
    "and writes it to stdout in another encoding. pprof -> OTLP writes one OTLP profile per\n"
    "sample type; OTLP -> pprof writes the first profile. --label sets series labels\n"
    "(service_name=... becomes the OTLP service.name).\n";

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    struct fc_buf b;
    uint8_t chunk[65536];
    size_t n;

    if (f == NULL) {
        return NULL;
    }
    fc_buf_init(&b, 1u << 30);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (fc_buf_append(&b, chunk, n) != FC_OK) {
            break;
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    fc_buf_reserve(&b, 0);
    return fc_buf_detach(&b, len);
}

int fc_cmd_convert(int argc, char **argv)
{
    const char *from = "pprof", *to = "otlp", *path = NULL;
    const char *labels[64];
    size_t n_labels = 0;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_buf out;
    struct fc_error err = {0};
    struct fc_otlp_result res;
    uint8_t *data;
    size_t len;
    int rc = FC_OK;

    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
            from = argv[++i];
        } else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc) {
            to = argv[++i];
        } else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc && n_labels < 64) {
            labels[n_labels++] = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            fc_batch_unref(b);
            return 0;
        } else if (path == NULL) {
            path = argv[i];
        } else {
            fprintf(stderr, "flamecol convert: unexpected argument '%s'\n%s", argv[i], usage);
            fc_batch_unref(b);
            return 2;
        }
    }
    if (path == NULL) {
        fputs(usage, stderr);
        fc_batch_unref(b);
        return 2;
    }
    data = read_all(path, &len);
    if (data == NULL) {
        fprintf(stderr, "flamecol convert: cannot read %s\n", path);
        fc_batch_unref(b);
        return 1;
    }
    if (strcmp(from, "pprof") == 0) {
        rc = fc_pprof_decode(b, data, len, NULL, NULL, &err);
    } else if (strcmp(from, "otlp") == 0 || strcmp(from, "otlp-json") == 0) {
        struct fc_buf plain;
        fc_buf_init(&plain, 0);
        if (fc_is_gzip(data, len) && fc_gunzip(data, len, 0, &plain, &err) == FC_OK) {
            free(data);
            data = fc_buf_detach(&plain, &len);
        }
        fc_buf_release(&plain);
        rc = strcmp(from, "otlp") == 0
                 ? fc_otlp_decode(b, data, len, &res, &err)
                 : fc_otlp_decode_json(b, (const char *)data, len, &res, &err);
    } else {
        rc = fc_errorf(&err, FC_EINVAL, "unknown --from %s", from);
    }
    for (size_t i = 0; rc == FC_OK && i < n_labels; i++) {
        char *eq = strchr(labels[i], '=');
        if (eq == NULL) {
            rc = fc_errorf(&err, FC_EINVAL, "--label %s: expected NAME=VALUE", labels[i]);
            break;
        }
        *eq = '\0';
        for (uint32_t p = 0; p < b->n_profiles && rc == FC_OK; p++) {
            rc = fc_profile_set_label(b, &b->profiles[p], labels[i], eq + 1);
        }
        *eq = '=';
    }
    fc_buf_init(&out, 0);
    if (rc == FC_OK && b->n_profiles == 0) {
        rc = fc_errorf(&err, FC_EPROTO, "no profile in %s", path);
    }
    if (rc == FC_OK) {
        if (strcmp(to, "otlp") == 0) {
            rc = fc_otlp_encode(b, &out, &err);
        } else if (strcmp(to, "otlp-json") == 0) {
            rc = fc_otlp_encode_json(b, &out, &err);
        } else if (strcmp(to, "pprof") == 0) {
            rc = fc_pprof_encode(b, &b->profiles[0], &out, &err);
        } else if (strcmp(to, "folded") == 0) {
            for (uint32_t p = 0; p < b->n_profiles && rc == FC_OK; p++) {
                rc = fc_folded_write_profile(b, &b->profiles[p], 0, &out);
            }
        } else {
            rc = fc_errorf(&err, FC_EINVAL, "unknown --to %s", to);
        }
    }
    if (rc == FC_OK) {
        fwrite(out.data, 1, out.len, stdout);
    } else {
        fprintf(stderr, "flamecol convert: %s\n", err.msg);
    }
    fc_buf_release(&out);
    fc_batch_unref(b);
    free(data);
    return rc == FC_OK ? 0 : 1;
}
