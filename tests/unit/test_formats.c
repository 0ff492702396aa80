/* Folded text, multipart, JSON, gzip, and Pyroscope's name/time/profile-type rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <libdeflate.h>
#include <pthread.h>
#include <zlib.h>
#include <zstd.h>

#include "core/batch.h"
#include "formats/folded.h"
#include "formats/gzip.h"
#include "formats/zstd.h"
#include "formats/json.h"
#include "formats/multipart.h"
#include "formats/pprof.h"
#include "formats/pyroscope.h"
#include "tests/unit/fc_test.h"

static struct fc_profile *one_type_profile(struct fc_batch *b)
{
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;

    fc_dict_cstring(b, "samples", &vt.type);
    fc_dict_cstring(b, "count", &vt.unit);
    fc_profile_set_sample_types(b, p, &vt, 1);
    return p;
}

static void test_folded_round_trip(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = one_type_profile(b);
    struct fc_error err = {0};
    struct fc_buf out;
    const char *in = "main;a;b 10\r\nmain;a 5\n\nno-count-line\nmain;c;d;e 1\n";

    (void)state;
    fc_buf_init(&out, 0);
    assert_int_equal(fc_folded_decode(b, p, in, strlen(in), false, 0, &err), FC_OK);
    assert_int_equal(p->n_samples, 3);
    assert_int_equal(fc_profile_total(p, 0), 16);
    fc_folded_write_profile(b, p, 0, &out);
    assert_string_equal((const char *)out.data, "main;a;b 10\nmain;a 5\nmain;c;d;e 1\n");
    /* Leaf first in the stack: location 0 is "b". */
    {
        const struct fc_stack *st = &b->dict.stacks[p->samples[0].stack];
        const struct fc_location *leaf = &b->dict.locations[fc_span_idx(b, st->locations)[0]];
        assert_string_equal(
            fc_str(b, b->dict.functions[b->dict.lines[leaf->lines_off].function].name), "b");
    }
    fc_buf_release(&out);
    fc_batch_unref(b);
}

static void test_folded_errors_and_lines_mode(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = one_type_profile(b);
    struct fc_error err = {0};
    const char *lines = "a;b\na;b\nc\n";

    (void)state;
    assert_int_equal(fc_folded_decode(b, p, "a;b 1\na;c x1\n", 12, false, 0, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "line 2"));
    p = one_type_profile(b);
    assert_int_equal(fc_folded_decode(b, p, lines, strlen(lines), true, 0, &err), FC_OK);
    /* Found by fuzzing: an empty body on a fresh batch (no index pool yet). */
    {
        struct fc_batch *fresh = fc_batch_new(0);
        struct fc_profile *fp = one_type_profile(fresh);
        assert_int_equal(fc_folded_decode(fresh, fp, "", 0, false, 0, &err), FC_OK);
        assert_int_equal(fp->n_samples, 0);
        fc_batch_unref(fresh);
    }
    assert_int_equal(fc_profile_total(p, 0), 3);
    p = one_type_profile(b);
    assert_int_equal(fc_folded_decode(b, p, "a;b;c;d 2\n", 10, false, 2, &err), FC_OK);
    assert_int_equal(b->dict.stacks[p->samples[0].stack].locations.n, 2);
    fc_batch_unref(b);
}

static void test_multipart_parses_sdk_shape(void **state)
{
    const char *ct = "multipart/form-data; boundary=XyZ";
    const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
        "Content-Type: application/octet-stream\r\n"
        "\r\n"
        "\x1f\x8b binary\r\n--not-the-boundary\r\n"
        "\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"sample_type_config\"; "
        "filename=\"sample_type_config.json\"\r\n"
        "\r\n"
        "{}\r\n"
        "--XyZ--\r\n";
    struct fc_multipart_part parts[FC_MULTIPART_MAX_PARTS];
    size_t n = 0;
    struct fc_error err = {0};
    const struct fc_multipart_part *p;

    (void)state;
    assert_int_equal(
        fc_multipart_parse(ct, (const uint8_t *)body, sizeof(body) - 1, parts, &n, &err), FC_OK);
    assert_int_equal(n, 2);
    p = fc_multipart_find(parts, n, "profile");
    assert_non_null(p);
    assert_string_equal(p->filename, "profile.pprof");
    assert_int_equal(p->len, strlen("\x1f\x8b binary\r\n--not-the-boundary\r\n"));
    assert_memory_equal(p->data, "\x1f\x8b binary", 9);
    p = fc_multipart_find(parts, n, "sample_type_config");
    assert_int_equal(p->len, 2);
    assert_int_equal(fc_multipart_parse("multipart/form-data", (const uint8_t *)body,
                                        sizeof(body) - 1, parts, &n, &err),
                     FC_EPROTO);
    assert_non_null(strstr(err.msg, "boundary"));
    assert_int_equal(fc_multipart_parse(ct, (const uint8_t *)body, 60, parts, &n, &err), FC_EPROTO);
}

static void test_json(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *v;
    struct fc_error err = {0};
    const char *doc = "{\"a\": [1, \"2\", true, null], \"s\": \"caf\\u00e9 \\ud83d\\ude00\\n\","
                      " \"n\": -12, \"big\": \"9007199254740993\"}";
    int64_t i;
    uint8_t *bytes;
    size_t len;

    (void)state;
    assert_int_equal(fc_json_parse(a, doc, strlen(doc), &v, &err), FC_OK);
    assert_int_equal(fc_json_get(v, "a")->n, 4);
    assert_string_equal(fc_json_get(v, "s")->str, "caf\xc3\xa9 \xf0\x9f\x98\x80\n");
    assert_int_equal(fc_json_int64(fc_json_get(v, "n"), &i), 0);
    assert_int_equal(i, -12);
    assert_int_equal(fc_json_int64(fc_json_get(v, "big"), &i), 0);
    assert_int_equal(i, 9007199254740993LL);
    assert_int_equal(fc_json_parse(a, "{\"a\":", 5, &v, &err), FC_EPROTO);
    assert_int_equal(fc_json_parse(a, "[1] x", 5, &v, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "trailing"));
    assert_int_equal(fc_base64_decode(a, "aGVsbG8=", 8, &bytes, &len), FC_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(bytes, "hello", 5);
    assert_int_equal(fc_base64_decode(a, "a$==", 4, &bytes, &len), FC_EPROTO);
    fc_arena_free(a);
}

static void test_pyroscope_name(void **state)
{
    struct fc_pyro_name n;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_pyro_parse_name("my-app.cpu{env=prod, region = eu-north ,x.y=1}", &n, &err),
                     FC_OK);
    assert_string_equal(n.app, "my-app.cpu");
    assert_int_equal(n.n_labels, 3);
    assert_string_equal(n.labels[1].key, "region");
    assert_string_equal(n.labels[1].value, "eu-north");
    assert_int_equal(fc_pyro_parse_name("ns/app", &n, &err), FC_OK);
    assert_int_equal(fc_pyro_parse_name("app{}", &n, &err), FC_OK);
    assert_int_equal(n.n_labels, 0);
    assert_int_equal(fc_pyro_parse_name("{a=b}", &n, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "service name is required"));
    assert_int_equal(fc_pyro_parse_name("app{a-b=c}", &n, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "invalid label name"));
    assert_int_equal(fc_pyro_parse_name("app{a=b", &n, &err), FC_EPROTO);
    assert_int_equal(fc_pyro_parse_name("app{a=1,a=2}", &n, &err), FC_EPROTO);
}

static void test_pyroscope_time(void **state)
{
    int64_t t;
    int64_t now = 1700000000LL * 1000000000LL;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_pyro_parse_time("1700000000", now, &t, &err), FC_OK);
    assert_int_equal(t, 1700000000LL * 1000000000LL);
    assert_int_equal(fc_pyro_parse_time("1700000000123", now, &t, &err), FC_OK);
    assert_int_equal(t, 1700000000123LL * 1000000LL);
    assert_int_equal(fc_pyro_parse_time("1700000000123456", now, &t, &err), FC_OK);
    assert_int_equal(t, 1700000000123456LL * 1000LL);
    assert_int_equal(fc_pyro_parse_time("1700000000123456789", now, &t, &err), FC_OK);
    assert_int_equal(t, 1700000000123456789LL);
    assert_int_equal(fc_pyro_parse_time("now-1h", now, &t, &err), FC_OK);
    assert_int_equal(t, now - 3600LL * 1000000000LL);
    assert_int_equal(fc_pyro_parse_time("now", now, &t, &err), FC_OK);
    assert_int_equal(t, now);
    assert_int_equal(fc_pyro_parse_time("20231114", now, &t, &err), FC_OK);
    assert_int_equal(t, 1699920000LL * 1000000000LL);
    assert_int_equal(fc_pyro_parse_time("yesterday", now, &t, &err), FC_EPROTO);
    /* Found by fuzzing: values past the int64 ns range are errors, not overflow. */
    assert_int_equal(fc_pyro_parse_time("now-99999999999999999y", now, &t, &err), FC_EPROTO);
    assert_int_equal(fc_pyro_parse_time("9999999999999", now, &t, &err), FC_EPROTO);
    /* Not a date this clock can hold: 8 digits are then seconds, as in Pyroscope. */
    assert_int_equal(fc_pyro_parse_time("99991231", now, &t, &err), FC_OK);
    assert_int_equal(t, 99991231LL * 1000000000LL);
    assert_int_equal(fc_pyro_parse_time("now-1fortnight", now, &t, &err), FC_EPROTO);
}

static void profile_name_of(const char *file, const char *expected, const char *type_id)
{
    char path[1024], name[64];
    size_t len;
    uint8_t *data;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};
    struct fc_buf id;
    int found = 0;

    snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), file);
    data = fc_test_read(path, &len);
    assert_non_null(data);
    assert_int_equal(fc_pprof_decode(b, data, len, NULL, &p, &err), FC_OK);
    fc_pyro_profile_name(b, p, NULL, 0, name, sizeof(name));
    assert_string_equal(name, expected);
    fc_profile_set_label(b, p, "__name__", name);
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        fc_buf_init(&id, 0);
        fc_pyro_profile_type_id(b, p, t, &id);
        found += strcmp((const char *)id.data, type_id) == 0;
        if (found == 0 && t + 1 == p->n_sample_types) {
            fprintf(stderr, "%s: last type id %s, wanted %s\n", file, (const char *)id.data,
                    type_id);
        }
        fc_buf_release(&id);
    }
    assert_int_equal(found, 1);
    fc_batch_unref(b);
    free(data);
}

static void test_profile_names_as_pyroscope(void **state)
{
    (void)state;
    profile_name_of("go-1s-cpu.pb.gz", "process_cpu",
                    "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    profile_name_of("go-1s-cpu.pb.gz", "process_cpu", "process_cpu:samples:count:cpu:nanoseconds");
    profile_name_of("go-1s-heap.pb.gz", "memory", "memory:alloc_space:bytes:space:bytes");
    profile_name_of("go-1s-mutex.pb.gz", "mutex", "mutex:delay:nanoseconds:contentions:count");
    profile_name_of("go-1s-goroutine.pb.gz", "goroutines",
                    "goroutines:goroutine:count:goroutine:count");
    profile_name_of("node-1s-wall.pb.gz", "wall", "wall:wall:nanoseconds:wall:nanoseconds");
}

/* A gzip member made by zlib (the reference), appended to out. */
static void zlib_gzip(const uint8_t *in, size_t len, struct fc_buf *out)
{
    z_stream z;
    uLong bound;

    memset(&z, 0, sizeof(z));
    assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    bound = deflateBound(&z, (uLong)len);
    assert_int_equal(fc_buf_reserve(out, bound), FC_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = out->data + out->len;
    z.avail_out = (uInt)bound;
    assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
    out->len += bound - z.avail_out;
    deflateEnd(&z);
}

/* zlib's inflate of one gzip member (the reference); true when it is whole and valid. */
static bool zlib_gunzip(const uint8_t *gz, size_t len, struct fc_buf *out)
{
    z_stream z;
    uint8_t chunk[16384];
    int zr;

    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        return false;
    }
    z.next_in = (Bytef *)(uintptr_t)gz;
    z.avail_in = (uInt)len;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END) {
            break;
        }
        if (fc_buf_append(out, chunk, sizeof(chunk) - z.avail_out) != FC_OK) {
            zr = Z_MEM_ERROR;
            break;
        }
    } while (zr != Z_STREAM_END);
    inflateEnd(&z);
    return zr == Z_STREAM_END && z.avail_in == 0;
}

/*
 * FC_GZIP_FASTEST (ISA-L, what the exporters send): zlib reads back every
 * input whole, compressible text compresses, and incompressible bytes (the
 * stored-block bound) and the empty input still make valid members.
 */
static void test_gzip_fastest(void **state)
{
    enum { N = 300000 };
    uint8_t *text = malloc(N), *noise = malloc(N);
    uint32_t x = 4242;
    const size_t sizes[] = {0, 1, 100, 65535, 65536, 200001, N};
    struct fc_buf gz, back;

    (void)state;
    for (size_t i = 0; i < N;) {
        /* Frames' names in random order: LZ77 matches, as in a profile. */
        static const char *const words[] = {"runtime.mallocgc ", "main.handle ",
                                            "net/http.(*conn).serve ", "syscall.Syscall "};
        x = x * 1103515245u + 12345u;
        for (const char *w = words[(x >> 16) % 4]; *w != '\0' && i < N; w++, i++) {
            text[i] = (uint8_t)*w;
        }
    }
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        noise[i] = (uint8_t)(x >> 24);
    }
    fc_buf_init(&gz, 0);
    fc_buf_init(&back, 0);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int which = 0; which < 2; which++) {
            const uint8_t *in = which ? noise : text;
            struct fc_error err = {0};
            fc_buf_reset(&gz);
            fc_buf_reset(&back);
            assert_int_equal(fc_gzip(in, sizes[k], FC_GZIP_FASTEST, &gz, &err), FC_OK);
            assert_true(fc_is_gzip(gz.data, gz.len));
            assert_true(zlib_gunzip(gz.data, gz.len, &back));
            assert_int_equal(back.len, sizes[k]);
            assert_true(sizes[k] == 0 || memcmp(back.data, in, sizes[k]) == 0);
            if (!which && sizes[k] >= 65535) {
                /* Four words at random: a few bits a word once matched. */
                assert_true(gz.len < sizes[k] / 4);
            }
        }
    }
    fc_buf_release(&gz);
    fc_buf_release(&back);
    free(text);
    free(noise);
}

static int gunzip(const struct fc_buf *gz, size_t limit, struct fc_buf *out, size_t *trailing)
{
    struct fc_error err = {0};

    fc_buf_reset(out);
    return fc_gunzip_ex(gz->data, gz->len, limit, out, trailing, &err);
}

static void test_gunzip(void **state)
{
    enum { N = 300000 };
    uint8_t *text = malloc(N);
    uint32_t x = 12345;
    struct fc_buf gz, out;
    size_t trailing = 99;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        text[i] = (uint8_t)("abcdefgh"[(x >> 16) % 8]);
    }
    fc_buf_init(&gz, 0);
    fc_buf_init(&out, 0);
    /* One member, with the exact limit and one byte under it. */
    zlib_gzip(text, N, &gz);
    assert_int_equal(gunzip(&gz, N, &out, &trailing), FC_OK);
    assert_int_equal(out.len, N);
    assert_memory_equal(out.data, text, N);
    assert_int_equal(trailing, 0);
    assert_int_equal(gunzip(&gz, N - 1, &out, NULL), FC_ETOOBIG);
    /* A large member then a tiny one: the last ISIZE under-guesses the first. */
    zlib_gzip(text, 7, &gz);
    assert_int_equal(gunzip(&gz, 0, &out, &trailing), FC_OK);
    assert_int_equal(out.len, N + 7);
    assert_memory_equal(out.data + N, text, 7);
    assert_int_equal(trailing, 0);
    /* The limit holds for the members together, not each alone. */
    assert_int_equal(gunzip(&gz, N + 6, &out, NULL), FC_ETOOBIG);
    assert_int_equal(gunzip(&gz, N + 7, &out, NULL), FC_OK);
    /* Bytes after the last member are reported, not read. */
    assert_int_equal(fc_buf_append(&gz, "xyz", 3), FC_OK);
    assert_int_equal(gunzip(&gz, 0, &out, &trailing), FC_OK);
    assert_int_equal(out.len, N + 7);
    assert_int_equal(trailing, 3);
    gz.len -= 3;
    /* Cut anywhere: refused. */
    for (size_t cut = 1; cut < 40; cut += 3) {
        struct fc_buf c = gz;
        c.len = gz.len - cut;
        assert_int_equal(gunzip(&c, 0, &out, NULL), FC_EPROTO);
    }
    /*
     * An ISIZE that lies (1 GiB) is caught, and the buffer it sizes stays
     * within what deflate can make of the input (about 1032:1).
     */
    fc_buf_reset(&gz);
    zlib_gzip(text, 1000, &gz);
    gz.data[gz.len - 1] = 0x40;
    fc_buf_release(&out);
    assert_int_equal(gunzip(&gz, 0, &out, NULL), FC_EPROTO);
    assert_true(out.cap <= 2 * (1032 * gz.len + 1));
    /* A bomb: 64 MiB of zeros in about 64 KB stops at the limit. */
    {
        uint8_t *zeros = calloc(1, 64u << 20);
        fc_buf_reset(&gz);
        zlib_gzip(zeros, 64u << 20, &gz);
        free(zeros);
        assert_true(gz.len < 256 * 1024);
        fc_buf_release(&out);
        assert_int_equal(gunzip(&gz, 1u << 20, &out, NULL), FC_ETOOBIG);
        assert_true(out.cap <= 2u << 20);
    }
    /* Too short to be gzip, and not gzip at all. */
    {
        struct fc_buf c = gz;
        c.len = 10;
        assert_int_equal(gunzip(&c, 0, &out, NULL), FC_EPROTO);
        memset(c.data, 'a', 40);
        c.len = 40;
        assert_int_equal(gunzip(&c, 0, &out, NULL), FC_EPROTO);
    }
    fc_buf_release(&gz);
    fc_buf_release(&out);
    free(text);
}

/*
 * zstd bodies: frames made here by libzstd itself (the reference encoder)
 * from a known text; what comes back is compared with that text.
 */
/*
 * fc_gzip shares its compressors between threads and levels (a pool): every
 * call must give exactly what a compressor of its own level makes
 * (libdeflate called here directly is the reference), also while other
 * threads compress other inputs at other levels at the same time.
 */
#define GZ_THREADS 4
#define GZ_ROUNDS 150
#define GZ_LEN 20000

struct gz_job {
    uint8_t in[GZ_LEN];
    struct fc_buf want[2]; /* level 1, level 6 */
    int wrong;
};

static void *gz_worker(void *arg)
{
    struct gz_job *j = arg;
    struct fc_buf out, back;

    fc_buf_init(&out, 0);
    fc_buf_init(&back, 0);
    for (int i = 0; i < GZ_ROUNDS; i++) {
        int k = i % 3 == 2; /* levels 1, FC_GZIP_FASTEST (read back by zlib) and 6 in turn */
        struct fc_error err = {0};
        fc_buf_reset(&out);
        if (i % 3 == 1) {
            fc_buf_reset(&back);
            if (fc_gzip(j->in, GZ_LEN, FC_GZIP_FASTEST, &out, &err) != FC_OK ||
                !zlib_gunzip(out.data, out.len, &back) || back.len != GZ_LEN ||
                memcmp(back.data, j->in, GZ_LEN) != 0) {
                j->wrong++;
            }
            continue;
        }
        if (fc_gzip(j->in, GZ_LEN, k ? 6 : 1, &out, &err) != FC_OK || out.len != j->want[k].len ||
            memcmp(out.data, j->want[k].data, out.len) != 0) {
            j->wrong++;
        }
    }
    fc_buf_release(&out);
    fc_buf_release(&back);
    return NULL;
}

static void test_gzip_shared_compressors(void **state)
{
    static struct gz_job jobs[GZ_THREADS];
    pthread_t t[GZ_THREADS];
    const int levels[2] = {1, 6};

    (void)state;
    for (int n = 0; n < GZ_THREADS; n++) {
        uint32_t x = 777u + (uint32_t)n;
        for (size_t i = 0; i < GZ_LEN; i++) {
            x = x * 1103515245u + 12345u;
            jobs[n].in[i] = (uint8_t)("abcdefghijklmnop"[(x >> 16) % (4 + 3 * (unsigned)n)]);
        }
        for (int k = 0; k < 2; k++) {
            struct libdeflate_compressor *c = libdeflate_alloc_compressor(levels[k]);
            size_t bound = libdeflate_gzip_compress_bound(c, GZ_LEN);
            fc_buf_init(&jobs[n].want[k], 0);
            assert_int_equal(fc_buf_reserve(&jobs[n].want[k], bound), FC_OK);
            jobs[n].want[k].len =
                libdeflate_gzip_compress(c, jobs[n].in, GZ_LEN, jobs[n].want[k].data, bound);
            assert_true(jobs[n].want[k].len > 0);
            libdeflate_free_compressor(c);
        }
        /* The levels differ on this input: a compressor of the wrong level shows. */
        assert_true(jobs[n].want[0].len != jobs[n].want[1].len ||
                    memcmp(jobs[n].want[0].data, jobs[n].want[1].data, jobs[n].want[0].len) != 0);
    }
    for (int n = 0; n < GZ_THREADS; n++) {
        assert_int_equal(pthread_create(&t[n], NULL, gz_worker, &jobs[n]), 0);
    }
    for (int n = 0; n < GZ_THREADS; n++) {
        pthread_join(t[n], NULL);
    }
    for (int n = 0; n < GZ_THREADS; n++) {
        assert_int_equal(jobs[n].wrong, 0);
        fc_buf_release(&jobs[n].want[0]);
        fc_buf_release(&jobs[n].want[1]);
    }
}

static void test_unzstd(void **state)
{
    enum { N = 200000 };
    uint8_t *text = malloc(N);
    struct fc_buf z, out;
    struct fc_error err = {0};
    size_t one;

    (void)state;
    for (size_t i = 0; i < N; i++) {
        text[i] = (uint8_t)("main;work;spin "[i % 15] + (i / 15) % 3);
    }
    fc_buf_init(&z, 0);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_zstd(text, N, 3, &z, &err), FC_OK);
    one = z.len;
    assert_true(one < N / 10);
    assert_int_equal(fc_unzstd(z.data, z.len, N, &out, &err), FC_OK);
    assert_int_equal(out.len, N);
    assert_memory_equal(out.data, text, N);
    /* The limit is exact. */
    fc_buf_reset(&out);
    assert_int_equal(fc_unzstd(z.data, z.len, N - 1, &out, &err), FC_ETOOBIG);
    assert_non_null(strstr(err.msg, "limit"));
    /* Two frames: both read. */
    assert_int_equal(fc_zstd(text, 7, 1, &z, &err), FC_OK);
    fc_buf_reset(&out);
    assert_int_equal(fc_unzstd(z.data, z.len, 0, &out, &err), FC_OK);
    assert_int_equal(out.len, N + 7);
    assert_memory_equal(out.data + N, text, 7);
    /* Cut short, or corrupt: refused, saying so. */
    fc_buf_reset(&out);
    assert_int_equal(fc_unzstd(z.data, one - 3, 0, &out, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "truncated"));
    z.data[0] ^= 0xff;
    fc_buf_reset(&out);
    assert_int_equal(fc_unzstd(z.data, z.len, 0, &out, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "zstd: "));
    fc_buf_reset(&out);
    assert_int_equal(fc_unzstd(z.data, 0, 0, &out, &err), FC_EPROTO);
    /* A frame asking for a 128 MiB window is refused before any is allocated. */
    {
        ZSTD_CCtx *c = ZSTD_createCCtx();
        size_t n;
        fc_buf_reset(&z);
        assert_int_equal(fc_buf_reserve(&z, ZSTD_compressBound(N)), FC_OK);
        ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 27);
        ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
        {
            /* Streamed, so the size is unknown and the window stays 2^27. */
            ZSTD_outBuffer o = {z.data, ZSTD_compressBound(N), 0};
            ZSTD_inBuffer in = {text, N, 0};
            n = ZSTD_compressStream2(c, &o, &in, ZSTD_e_continue);
            assert_false(ZSTD_isError(n));
            n = ZSTD_compressStream2(c, &o, &in, ZSTD_e_end);
            assert_int_equal(n, 0);
            z.len = o.pos;
        }
        ZSTD_freeCCtx(c);
        fc_buf_reset(&out);
        assert_int_equal(fc_unzstd(z.data, z.len, 0, &out, &err), FC_EPROTO);
        assert_non_null(strstr(err.msg, "zstd: "));
    }
    fc_buf_release(&z);
    fc_buf_release(&out);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folded_round_trip),
        cmocka_unit_test(test_folded_errors_and_lines_mode),
        cmocka_unit_test(test_multipart_parses_sdk_shape),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_gunzip),
        cmocka_unit_test(test_gzip_shared_compressors),
        cmocka_unit_test(test_gzip_fastest),
        cmocka_unit_test(test_unzstd),
        cmocka_unit_test(test_pyroscope_name),
        cmocka_unit_test(test_pyroscope_time),
        cmocka_unit_test(test_profile_names_as_pyroscope),
    };
    return cmocka_run_group_tests_name("formats", tests, NULL, NULL);
}
