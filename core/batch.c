#include "core/batch.h"

#include "core/mem.h"
#include "core/sat.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Grows an arena array to hold `need` elements; doubles to keep appends O(1). */
static int grow(struct fc_arena *a, void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    uint32_t ncap;
    void *q;

    if (need <= *cap) {
        return FC_OK;
    }
    if (need > UINT32_MAX / 2) {
        return FC_ETOOBIG;
    }
    ncap = *cap ? *cap : 8;
    while (ncap < need) {
        ncap *= 2;
    }
    q = fc_arena_realloc(a, *p, (size_t)*cap * elem, (size_t)ncap * elem);
    if (q == NULL) {
        return FC_ETOOBIG;
    }
    *p = q;
    *cap = ncap;
    return FC_OK;
}

#define GROW(b, arr, n_, cap_, need)                                                               \
    grow((b)->arena, (void **)&(arr), &(cap_), (need), sizeof(*(arr)))

/* ---- interning ---------------------------------------------------------------------------- */

typedef bool (*row_eq_fn)(const struct fc_batch *b, uint32_t id, const void *key);

static uint32_t slot_id(uint64_t s)
{
    return (uint32_t)(s & 0xffffffffu) - 1;
}

/* Slots keep the hash's high 32 bits; probing starts from them too. */
static bool intern_lookup(const struct fc_batch *b, const struct fc_intern *t, uint64_t h,
                          row_eq_fn eq, const void *key, uint32_t *id)
{
    uint32_t hi = (uint32_t)(h >> 32);

    if (t->cap == 0) {
        return false;
    }
    for (uint32_t i = hi & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        uint64_t s = t->slots[i];
        if (s == 0) {
            return false;
        }
        if ((uint32_t)(s >> 32) == hi && eq(b, slot_id(s), key)) {
            *id = slot_id(s);
            return true;
        }
    }
}

static void intern_put(struct fc_intern *t, uint64_t slot)
{
    for (uint32_t i = (uint32_t)(slot >> 32) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (t->slots[i] == 0) {
            t->slots[i] = slot;
            return;
        }
    }
}

static int intern_insert(struct fc_batch *b, struct fc_intern *t, uint64_t h, uint32_t id)
{
    uint64_t slot = (h & 0xffffffff00000000ull) | ((uint64_t)id + 1);

    if ((t->n + 1) * 4 >= t->cap * 3) {
        uint32_t ncap = t->cap ? t->cap * 2 : 64;
        uint64_t *old = t->slots;
        uint32_t ocap = t->cap;
        uint64_t *slots = fc_arena_calloc(b->arena, ncap, sizeof(uint64_t));
        if (slots == NULL) {
            return FC_ETOOBIG;
        }
        t->slots = slots;
        t->cap = ncap;
        for (uint32_t i = 0; i < ocap; i++) {
            if (old[i] != 0) {
                intern_put(t, old[i]);
            }
        }
    }
    intern_put(t, slot);
    t->n++;
    return FC_OK;
}

static uint64_t hash_span(const struct fc_batch *b, struct fc_span s, uint64_t seed)
{
    return XXH3_64bits_withSeed(b->dict.idx + s.off, (size_t)s.n * sizeof(uint32_t), seed);
}

/* ---- strings ------------------------------------------------------------------------------ */

struct str_key {
    const char *s;
    size_t len;
};

static bool str_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct str_key *k = key;

    return b->dict.str_len[id] == k->len && memcmp(b->dict.strings[id], k->s, k->len) == 0;
}

int fc_dict_string(struct fc_batch *b, const char *s, size_t len, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    struct str_key key = {s, len};
    uint64_t h = XXH3_64bits(s, len);
    uint32_t cap = d->cap_strings;
    char *copy;
    int rc;

    if (len > UINT32_MAX) {
        return FC_ETOOBIG;
    }
    if (intern_lookup(b, &d->i_strings, h, str_eq, &key, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->strings, d->n_strings, d->cap_strings, d->n_strings + 1);
    if (rc == FC_OK) {
        rc = grow(b->arena, (void **)&d->str_len, &cap, d->n_strings + 1, sizeof(uint32_t));
    }
    if (rc != FC_OK) {
        return rc;
    }
    copy = fc_arena_strndup(b->arena, s, len);
    if (copy == NULL) {
        return FC_ETOOBIG;
    }
    d->strings[d->n_strings] = copy;
    d->str_len[d->n_strings] = (uint32_t)len;
    rc = intern_insert(b, &d->i_strings, h, d->n_strings);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_strings++;
    return FC_OK;
}

int fc_dict_cstring(struct fc_batch *b, const char *s, uint32_t *out)
{
    return fc_dict_string(b, s, strlen(s), out);
}

/* ---- functions ---------------------------------------------------------------------------- */

static uint64_t function_hash(const struct fc_function *f)
{
    uint64_t k[4] = {f->name, f->system_name, f->filename, (uint64_t)f->start_line};
    return XXH3_64bits(k, sizeof(k));
}

static bool function_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct fc_function *x = &b->dict.functions[id];
    const struct fc_function *y = key;

    return x->name == y->name && x->system_name == y->system_name && x->filename == y->filename &&
           x->start_line == y->start_line;
}

int fc_dict_function(struct fc_batch *b, const struct fc_function *f, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    uint64_t h = function_hash(f);
    int rc;

    if (intern_lookup(b, &d->i_functions, h, function_eq, f, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->functions, d->n_functions, d->cap_functions, d->n_functions + 1);
    if (rc != FC_OK) {
        return rc;
    }
    d->functions[d->n_functions] = *f;
    rc = intern_insert(b, &d->i_functions, h, d->n_functions);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_functions++;
    return FC_OK;
}

/* ---- mappings ----------------------------------------------------------------------------- */

static uint64_t mapping_hash(const struct fc_batch *b, const struct fc_mapping *m)
{
    uint64_t k[6] = {m->memory_start, m->memory_limit, m->file_offset,
                     m->filename,     m->build_id,     m->flags};
    return hash_span(b, m->attrs, XXH3_64bits(k, sizeof(k)));
}

static bool mapping_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct fc_mapping *x = &b->dict.mappings[id];
    const struct fc_mapping *y = key;

    return x->memory_start == y->memory_start && x->memory_limit == y->memory_limit &&
           x->file_offset == y->file_offset && x->filename == y->filename &&
           x->build_id == y->build_id && x->flags == y->flags && fc_span_eq(b, x->attrs, y->attrs);
}

int fc_dict_mapping(struct fc_batch *b, const struct fc_mapping *m, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    uint64_t h = mapping_hash(b, m);
    int rc;

    if (intern_lookup(b, &d->i_mappings, h, mapping_eq, m, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->mappings, d->n_mappings, d->cap_mappings, d->n_mappings + 1);
    if (rc != FC_OK) {
        return rc;
    }
    d->mappings[d->n_mappings] = *m;
    rc = intern_insert(b, &d->i_mappings, h, d->n_mappings);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_mappings++;
    return FC_OK;
}

/* ---- locations ---------------------------------------------------------------------------- */

struct location_key {
    const struct fc_location *loc;
    const struct fc_line *lines;
    uint32_t n_lines;
};

static uint64_t location_hash(const struct fc_batch *b, const struct location_key *k)
{
    uint64_t head[3] = {k->loc->mapping, k->loc->address, k->loc->is_folded};
    uint64_t h = XXH3_64bits(head, sizeof(head));

    for (uint32_t i = 0; i < k->n_lines; i++) {
        uint64_t l[3] = {k->lines[i].function, (uint64_t)k->lines[i].line,
                         (uint64_t)k->lines[i].column};
        h = XXH3_64bits_withSeed(l, sizeof(l), h);
    }
    return hash_span(b, k->loc->attrs, h);
}

static bool location_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct fc_location *x = &b->dict.locations[id];
    const struct location_key *k = key;

    if (x->mapping != k->loc->mapping || x->address != k->loc->address ||
        x->is_folded != k->loc->is_folded || x->n_lines != k->n_lines ||
        !fc_span_eq(b, x->attrs, k->loc->attrs)) {
        return false;
    }
    for (uint32_t i = 0; i < k->n_lines; i++) {
        const struct fc_line *l = &b->dict.lines[x->lines_off + i];
        if (l->function != k->lines[i].function || l->line != k->lines[i].line ||
            l->column != k->lines[i].column) {
            return false;
        }
    }
    return true;
}

int fc_dict_location(struct fc_batch *b, const struct fc_location *loc, const struct fc_line *lines,
                     uint32_t n_lines, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    struct location_key key = {loc, lines, n_lines};
    uint64_t h = location_hash(b, &key);
    struct fc_location *row;
    int rc;

    if (intern_lookup(b, &d->i_locations, h, location_eq, &key, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->locations, d->n_locations, d->cap_locations, d->n_locations + 1);
    if (rc == FC_OK) {
        rc = GROW(b, d->lines, d->n_lines, d->cap_lines, d->n_lines + n_lines);
    }
    if (rc != FC_OK) {
        return rc;
    }
    row = &d->locations[d->n_locations];
    *row = *loc;
    row->lines_off = d->n_lines;
    row->n_lines = n_lines;
    if (n_lines > 0) {
        memcpy(d->lines + d->n_lines, lines, n_lines * sizeof(*lines));
    }
    d->n_lines += n_lines;
    rc = intern_insert(b, &d->i_locations, h, d->n_locations);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_locations++;
    return FC_OK;
}

/* ---- index spans and stacks --------------------------------------------------------------- */

int fc_dict_span(struct fc_batch *b, const uint32_t *idx, uint32_t n, struct fc_span *out)
{
    struct fc_dict *d = &b->dict;
    int rc;

    out->off = 0;
    out->n = 0;
    if (n == 0) {
        return FC_OK;
    }
    rc = GROW(b, d->idx, d->n_idx, d->cap_idx, d->n_idx + n);
    if (rc != FC_OK) {
        return rc;
    }
    memcpy(d->idx + d->n_idx, idx, n * sizeof(uint32_t));
    out->off = d->n_idx;
    out->n = n;
    d->n_idx += n;
    return FC_OK;
}

struct stack_key {
    const uint32_t *locs;
    uint32_t n;
};

static bool stack_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct fc_stack *x = &b->dict.stacks[id];
    const struct stack_key *k = key;

    return x->locations.n == k->n && (k->n == 0 || memcmp(b->dict.idx + x->locations.off, k->locs,
                                                          k->n * sizeof(uint32_t)) == 0);
}

int fc_dict_stack(struct fc_batch *b, const uint32_t *locations, uint32_t n, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    struct stack_key key = {locations, n};
    uint64_t h = XXH3_64bits(locations, (size_t)n * sizeof(uint32_t));
    struct fc_span span;
    int rc;

    if (intern_lookup(b, &d->i_stacks, h, stack_eq, &key, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->stacks, d->n_stacks, d->cap_stacks, d->n_stacks + 1);
    if (rc == FC_OK) {
        rc = fc_dict_span(b, locations, n, &span);
    }
    if (rc != FC_OK) {
        return rc;
    }
    d->stacks[d->n_stacks].locations = span;
    rc = intern_insert(b, &d->i_stacks, h, d->n_stacks);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_stacks++;
    return FC_OK;
}

/* ---- attributes and links ----------------------------------------------------------------- */

static uint64_t attr_hash(const struct fc_attr *a)
{
    uint64_t k[4] = {a->key, a->unit, ((uint64_t)a->kind << 8) | a->flags, 0};

    switch (a->kind) {
    case FC_ATTR_STR:
        k[3] = a->v.str;
        break;
    case FC_ATTR_INT:
        k[3] = (uint64_t)a->v.i;
        break;
    case FC_ATTR_BOOL:
        k[3] = a->v.b;
        break;
    case FC_ATTR_DOUBLE:
        memcpy(&k[3], &a->v.d, sizeof(double));
        break;
    case FC_ATTR_BYTES:
    case FC_ATTR_ARRAY:
    case FC_ATTR_KVLIST:
        k[3] = XXH3_64bits(a->v.blob.data, a->v.blob.len);
        break;
    default:
        break;
    }
    return XXH3_64bits(k, sizeof(k));
}

static bool attr_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    const struct fc_attr *x = &b->dict.attrs[id];
    const struct fc_attr *y = key;

    if (x->key != y->key || x->unit != y->unit || x->kind != y->kind || x->flags != y->flags) {
        return false;
    }
    switch (x->kind) {
    case FC_ATTR_STR:
        return x->v.str == y->v.str;
    case FC_ATTR_INT:
        return x->v.i == y->v.i;
    case FC_ATTR_BOOL:
        return x->v.b == y->v.b;
    case FC_ATTR_DOUBLE:
        return memcmp(&x->v.d, &y->v.d, sizeof(double)) == 0;
    case FC_ATTR_BYTES:
    case FC_ATTR_ARRAY:
    case FC_ATTR_KVLIST:
        return x->v.blob.len == y->v.blob.len &&
               (x->v.blob.len == 0 || memcmp(x->v.blob.data, y->v.blob.data, x->v.blob.len) == 0);
    default:
        return true;
    }
}

int fc_dict_attr(struct fc_batch *b, const struct fc_attr *a, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    uint64_t h = attr_hash(a);
    struct fc_attr row = *a;
    int rc;

    if (intern_lookup(b, &d->i_attrs, h, attr_eq, a, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->attrs, d->n_attrs, d->cap_attrs, d->n_attrs + 1);
    if (rc != FC_OK) {
        return rc;
    }
    if ((a->kind == FC_ATTR_BYTES || a->kind == FC_ATTR_ARRAY || a->kind == FC_ATTR_KVLIST) &&
        a->v.blob.len > 0) {
        row.v.blob.data = fc_arena_memdup(b->arena, a->v.blob.data, a->v.blob.len);
        if (row.v.blob.data == NULL) {
            return FC_ETOOBIG;
        }
    }
    d->attrs[d->n_attrs] = row;
    rc = intern_insert(b, &d->i_attrs, h, d->n_attrs);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_attrs++;
    return FC_OK;
}

static bool link_eq(const struct fc_batch *b, uint32_t id, const void *key)
{
    return memcmp(&b->dict.links[id], key, sizeof(struct fc_link)) == 0;
}

int fc_dict_link(struct fc_batch *b, const struct fc_link *l, uint32_t *out)
{
    struct fc_dict *d = &b->dict;
    uint64_t h = XXH3_64bits(l, sizeof(*l));
    int rc;

    if (intern_lookup(b, &d->i_links, h, link_eq, l, out)) {
        return FC_OK;
    }
    rc = GROW(b, d->links, d->n_links, d->cap_links, d->n_links + 1);
    if (rc != FC_OK) {
        return rc;
    }
    d->links[d->n_links] = *l;
    rc = intern_insert(b, &d->i_links, h, d->n_links);
    if (rc != FC_OK) {
        return rc;
    }
    *out = d->n_links++;
    return FC_OK;
}

/* ---- batch -------------------------------------------------------------------------------- */

static int add_zero_rows(struct fc_batch *b)
{
    static const struct fc_function zf;
    static const struct fc_mapping zm;
    static const struct fc_location zl;
    static const struct fc_attr za;
    static const struct fc_link zk;
    static const struct fc_origin zo;
    uint32_t id;
    int rc = FC_OK;

    /* The index pool always exists, so spans never do arithmetic on NULL. */
    rc = GROW(b, b->dict.idx, b->dict.n_idx, b->dict.cap_idx, 16);
    /* Index 0 of every table is the zero value, as in OTLP. */
    rc = rc ? rc : fc_dict_string(b, "", 0, &id);
    rc = rc ? rc : fc_dict_function(b, &zf, &id);
    rc = rc ? rc : fc_dict_mapping(b, &zm, &id);
    rc = rc ? rc : fc_dict_location(b, &zl, NULL, 0, &id);
    rc = rc ? rc : fc_dict_stack(b, NULL, 0, &id);
    rc = rc ? rc : fc_dict_attr(b, &za, &id);
    rc = rc ? rc : fc_dict_link(b, &zk, &id);
    rc = rc ? rc : fc_batch_add_origin(b, &zo, &id);
    return rc;
}

struct fc_batch *fc_batch_new(size_t budget)
{
    struct fc_batch *b = fc_xcalloc(1, sizeof(*b));

    atomic_init(&b->refs, 1);
    b->arena = fc_arena_new(budget);
    b->tenant = FC_DEFAULT_TENANT;
    if (add_zero_rows(b) != FC_OK) {
        fc_arena_free(b->arena);
        free(b);
        return NULL;
    }
    return b;
}

struct fc_batch *fc_batch_ref(struct fc_batch *b)
{
    atomic_fetch_add(&b->refs, 1);
    return b;
}

void fc_batch_unref(struct fc_batch *b)
{
    if (b == NULL) {
        return;
    }
    if (atomic_fetch_sub(&b->refs, 1) == 1) {
        fc_arena_free(b->arena);
        free(b);
    }
}

void fc_batch_set_wire(struct fc_batch *b, const uint8_t *body, size_t len, const uint8_t *gzip,
                       size_t gzip_len, uint32_t profiles)
{
    struct fc_wire w = {.profiles = profiles};

    w.body = len > 0 ? fc_arena_memdup(b->arena, body, len) : NULL;
    w.len = len;
    if (w.body != NULL && gzip != NULL && gzip_len > 0) {
        w.gzip = fc_arena_memdup(b->arena, gzip, gzip_len);
        w.gzip_len = w.gzip != NULL ? gzip_len : 0;
    }
    b->wire = w.body != NULL ? w : (struct fc_wire){0};
}

void fc_batch_drop_wire(struct fc_batch *b)
{
    memset(&b->wire, 0, sizeof(b->wire));
}

int fc_batch_set_tenant(struct fc_batch *b, const char *tenant)
{
    const char *t = fc_arena_strdup(b->arena, tenant);

    if (t == NULL) {
        return FC_ETOOBIG;
    }
    b->tenant = t;
    return FC_OK;
}

bool fc_tenant_is_default(const char *tenant)
{
    return tenant != NULL && strcmp(tenant, FC_DEFAULT_TENANT) == 0;
}

int fc_tenant_check(const char *id, size_t len, struct fc_error *err)
{
    bool ok = len > 0 && len <= 150 && !(len == 1 && id[0] == '.') &&
              !(len == 2 && id[0] == '.' && id[1] == '.');

    for (size_t i = 0; ok && i < len; i++) {
        char c = id[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             (c != '\0' && strchr("!-_.*'()", c) != NULL);
    }
    if (ok) {
        return FC_OK;
    }
    return fc_errorf(err, FC_EPROTO,
                     "tenant id \"%.*s%s\" is not valid (1-150 characters of "
                     "A-Z a-z 0-9 ! - _ . * ' ( ))",
                     (int)(len > 64 ? 64 : len), id, len > 64 ? "..." : "");
}

const struct fc_attr *fc_attrs_find(const struct fc_batch *b, struct fc_span attrs, const char *key)
{
    for (uint32_t i = 0; i < attrs.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, attrs)[i]];
        if (strcmp(fc_str(b, a->key), key) == 0) {
            return a;
        }
    }
    return NULL;
}

int fc_batch_add_origin(struct fc_batch *b, const struct fc_origin *o, uint32_t *out)
{
    int rc = GROW(b, b->origins, b->n_origins, b->cap_origins, b->n_origins + 1);

    if (rc != FC_OK) {
        return rc;
    }
    b->origins[b->n_origins] = *o;
    *out = b->n_origins++;
    return FC_OK;
}

struct fc_profile *fc_batch_add_profile(struct fc_batch *b)
{
    struct fc_profile *p;

    if (GROW(b, b->profiles, b->n_profiles, b->cap_profiles, b->n_profiles + 1) != FC_OK) {
        return NULL;
    }
    p = &b->profiles[b->n_profiles++];
    memset(p, 0, sizeof(*p));
    return p;
}

static int find_label(const struct fc_batch *b, const struct fc_profile *p, const char *name,
                      uint32_t *pos)
{
    uint32_t lo = 0;
    uint32_t hi = p->n_labels;

    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(fc_str(b, p->labels[mid].name), name);
        if (c == 0) {
            *pos = mid;
            return 1;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *pos = lo;
    return 0;
}

int fc_profile_set_label(struct fc_batch *b, struct fc_profile *p, const char *name,
                         const char *value)
{
    struct fc_label l;
    uint32_t pos;
    int rc;

    rc = fc_dict_cstring(b, name, &l.name);
    if (rc == FC_OK) {
        rc = fc_dict_cstring(b, value, &l.value);
    }
    if (rc != FC_OK) {
        return rc;
    }
    if (find_label(b, p, name, &pos)) {
        p->labels[pos].value = l.value;
        return FC_OK;
    }
    rc = GROW(b, p->labels, p->n_labels, p->cap_labels, p->n_labels + 1);
    if (rc != FC_OK) {
        return rc;
    }
    memmove(p->labels + pos + 1, p->labels + pos, (p->n_labels - pos) * sizeof(l));
    p->labels[pos] = l;
    p->n_labels++;
    return FC_OK;
}

const char *fc_profile_label(const struct fc_batch *b, const struct fc_profile *p, const char *name)
{
    uint32_t pos;

    return find_label(b, p, name, &pos) ? fc_str(b, p->labels[pos].value) : NULL;
}

int fc_profile_remove_label(struct fc_batch *b, struct fc_profile *p, const char *name)
{
    uint32_t pos;

    if (!find_label(b, p, name, &pos)) {
        return FC_OK;
    }
    memmove(p->labels + pos, p->labels + pos + 1, (p->n_labels - pos - 1) * sizeof(p->labels[0]));
    p->n_labels--;
    return FC_OK;
}

int fc_profile_set_sample_types(struct fc_batch *b, struct fc_profile *p,
                                const struct fc_value_type *types, uint32_t n)
{
    p->sample_types = fc_arena_memdup(b->arena, types, n * sizeof(*types));
    if (n > 0 && p->sample_types == NULL) {
        return FC_ETOOBIG;
    }
    p->n_sample_types = n;
    return FC_OK;
}

int fc_profile_add_sample(struct fc_batch *b, struct fc_profile *p, const struct fc_sample *s,
                          const int64_t *values, uint32_t n_values, const int64_t *ts,
                          uint32_t n_ts)
{
    struct fc_sample *row;
    int rc;

    if ((uint64_t)p->n_nums + n_values + n_ts > UINT32_MAX / 2) {
        return FC_ETOOBIG;
    }
    rc = GROW(b, p->samples, p->n_samples, p->cap_samples, p->n_samples + 1);
    if (rc == FC_OK) {
        rc = GROW(b, p->nums, p->n_nums, p->cap_nums, p->n_nums + n_values + n_ts);
    }
    if (rc != FC_OK) {
        return rc;
    }
    row = &p->samples[p->n_samples++];
    *row = *s;
    row->values_off = p->n_nums;
    row->n_values = n_values;
    if (n_values > 0) {
        memcpy(p->nums + p->n_nums, values, n_values * sizeof(int64_t));
    }
    p->n_nums += n_values;
    row->ts_off = p->n_nums;
    row->n_ts = n_ts;
    if (n_ts > 0) {
        memcpy(p->nums + p->n_nums, ts, n_ts * sizeof(int64_t));
    }
    p->n_nums += n_ts;
    return FC_OK;
}

int64_t fc_sample_value(const struct fc_profile *p, const struct fc_sample *s, uint32_t t)
{
    if (s->n_values == 0) {
        return (int64_t)s->n_ts;
    }
    if (p->n_sample_types <= 1 && s->n_values > 1) {
        /* OTLP: one sample type, several values (one per timestamp): sum them. */
        int64_t sum = 0;
        for (uint32_t i = 0; i < s->n_values; i++) {
            sum = fc_sat_add(sum, p->nums[s->values_off + i]);
        }
        return sum;
    }
    return t < s->n_values ? p->nums[s->values_off + t] : 0;
}

int64_t fc_profile_total(const struct fc_profile *p, uint32_t t)
{
    int64_t total = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        total = fc_sat_add(total, fc_sample_value(p, &p->samples[i], t));
    }
    return total;
}

uint64_t fc_batch_sample_count(const struct fc_batch *b)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        n += b->profiles[i].n_samples;
    }
    return n;
}
