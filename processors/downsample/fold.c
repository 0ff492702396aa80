/* Call-tree folding: see fold.h. */
#include "processors/downsample/fold.h"

#include "core/mem.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define NONE UINT32_MAX

/* The call tree of one profile; node 0 is the (virtual) root above every root frame. */
struct tree {
    uint32_t *parent, *loc, *depth, *nchild;
    uint32_t *frames; /* the location's lines (inlined functions), at least 1 */
    uint64_t *w;      /* weight: sum of |value| through the node, driving type */
    uint32_t n, cap;
    uint64_t *slots; /* (parent << 32 | loc) keys; node id in ids[] */
    uint32_t *ids;
    uint32_t n_slots; /* power of two */
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static void tree_grow_slots(struct tree *t)
{
    uint32_t n = t->n_slots ? t->n_slots * 2 : 1024;
    uint64_t *slots = fc_xmalloc((size_t)n * sizeof(*slots));
    uint32_t *ids = fc_xcalloc(n, sizeof(*ids));

    for (uint32_t i = 0; i < t->n_slots; i++) {
        if (t->ids[i] != 0) {
            uint32_t h = (uint32_t)mix(t->slots[i]) & (n - 1);
            while (ids[h] != 0) {
                h = (h + 1) & (n - 1);
            }
            slots[h] = t->slots[i];
            ids[h] = t->ids[i];
        }
    }
    free(t->slots);
    free(t->ids);
    t->slots = slots;
    t->ids = ids;
    t->n_slots = n;
}

static uint32_t tree_add(struct tree *t, uint32_t parent, uint32_t loc)
{
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 1024;
        t->parent = fc_xrealloc(t->parent, (size_t)t->cap * sizeof(uint32_t));
        t->loc = fc_xrealloc(t->loc, (size_t)t->cap * sizeof(uint32_t));
        t->depth = fc_xrealloc(t->depth, (size_t)t->cap * sizeof(uint32_t));
        t->nchild = fc_xrealloc(t->nchild, (size_t)t->cap * sizeof(uint32_t));
        t->frames = fc_xrealloc(t->frames, (size_t)t->cap * sizeof(uint32_t));
        t->w = fc_xrealloc(t->w, (size_t)t->cap * sizeof(uint64_t));
    }
    t->parent[t->n] = parent;
    t->loc[t->n] = loc;
    t->depth[t->n] = t->n == 0 ? 0 : t->depth[parent] + 1;
    t->nchild[t->n] = 0;
    t->frames[t->n] = 1;
    t->w[t->n] = 0;
    if (t->n != 0) {
        t->nchild[parent]++;
    }
    return t->n++;
}

/* The child of parent at location loc, made when missing. ids[] 0 = empty slot (node 0 is never a
 * child). */
static uint32_t tree_child(struct tree *t, uint32_t parent, uint32_t loc, uint32_t frames)
{
    uint64_t key = (uint64_t)parent << 32 | loc;
    uint32_t h, id;

    if ((uint64_t)(t->n + 1) * 2 > t->n_slots) {
        tree_grow_slots(t);
    }
    h = (uint32_t)mix(key) & (t->n_slots - 1);
    while (t->ids[h] != 0) {
        if (t->slots[h] == key) {
            return t->ids[h];
        }
        h = (h + 1) & (t->n_slots - 1);
    }
    id = tree_add(t, parent, loc);
    t->frames[id] = frames > 0 ? frames : 1;
    t->slots[h] = key;
    t->ids[h] = id;
    return id;
}

static void tree_free(struct tree *t)
{
    free(t->parent);
    free(t->loc);
    free(t->depth);
    free(t->nchild);
    free(t->frames);
    free(t->w);
    free(t->slots);
    free(t->ids);
}

uint32_t fc_fold_drive_type(const struct fc_batch *b, const struct fc_profile *p, const char *name)
{
    if (p->n_sample_types == 0) {
        return 0;
    }
    for (uint32_t t = 0; name != NULL && name[0] != '\0' && t < p->n_sample_types; t++) {
        if (p->sample_types[t].type < b->dict.n_strings &&
            strcmp(fc_str(b, p->sample_types[t].type), name) == 0) {
            return t;
        }
    }
    if (p->default_sample_type != 0 && p->default_sample_type < b->dict.n_strings) {
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            if (p->sample_types[t].type == p->default_sample_type) {
                return t;
            }
        }
    }
    return p->n_sample_types - 1;
}

static uint64_t mag(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static uint64_t sat_addu(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* The location of a single frame named `other` (the same row the limits processor makes). */
static int other_location(struct fc_batch *b, uint32_t *loc)
{
    struct fc_function f = {0};
    struct fc_location l = {0};
    struct fc_line line = {0};
    int rc;

    rc = fc_dict_cstring(b, "other", &f.name);
    f.system_name = f.name;
    rc = rc ? rc : fc_dict_function(b, &f, &line.function);
    return rc ? rc : fc_dict_location(b, &l, &line, 1, loc);
}

struct cand {
    uint64_t w;
    uint32_t depth, id;
};

static int heavier_first(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;

    if (a->w != b->w) {
        return a->w > b->w ? -1 : 1;
    }
    if (a->depth != b->depth) {
        return a->depth < b->depth ? -1 : 1;
    }
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Chooses kept[] (root always kept); returns the folded tree's node count. */
static uint64_t choose(const struct tree *t, const struct fc_fold_options *o, bool *kept)
{
    uint64_t total = t->w[0], count = 0;
    double thr = o->min_fraction > 0 ? o->min_fraction * (double)total : 0;
    uint32_t *unkept = fc_xmalloc((size_t)t->n * sizeof(*unkept));
    bool *ok = fc_xcalloc(t->n, sizeof(*ok));

    for (uint32_t i = 0; i < t->n; i++) {
        unkept[i] = t->nchild[i];
    }
    ok[0] = true;
    for (uint32_t i = 1; i < t->n; i++) {
        ok[i] = ok[t->parent[i]] && (o->max_depth == 0 || t->depth[i] <= o->max_depth) &&
                (o->min_fraction <= 0 || (double)t->w[i] >= thr);
    }
    kept[0] = true;
    if (o->max_nodes == 0) {
        for (uint32_t i = 1; i < t->n; i++) {
            kept[i] = ok[i];
            if (kept[i]) {
                unkept[t->parent[i]]--;
            }
        }
    } else {
        struct cand *c = fc_xmalloc((size_t)t->n * sizeof(*c));
        uint32_t nc = 0;
        uint64_t used = unkept[0] > 0; /* the root's `other` while a root frame is folded */
        for (uint32_t i = 1; i < t->n; i++) {
            if (ok[i]) {
                c[nc].w = t->w[i];
                c[nc].depth = t->depth[i];
                c[nc].id = i;
                nc++;
            }
        }
        qsort(c, nc, sizeof(*c), heavier_first);
        for (uint32_t k = 0; k < nc; k++) {
            uint32_t i = c[k].id, par = t->parent[i];
            uint64_t cost;
            if (!kept[par]) {
                continue;
            }
            /* its frames, its own `other` if it has children, less its parent's if it was last */
            cost = t->frames[i] + (t->nchild[i] > 0);
            if (unkept[par] == 1) {
                cost--;
            }
            if (used + cost > o->max_nodes) {
                continue;
            }
            used += cost;
            kept[i] = true;
            unkept[par]--;
        }
        free(c);
    }
    for (uint32_t i = 0; i < t->n; i++) {
        if (kept[i]) {
            count += (i != 0 ? t->frames[i] : 0) + (unkept[i] > 0);
        }
    }
    free(unkept);
    free(ok);
    return count;
}

struct skey {
    uint64_t h;
    uint32_t row; /* index into the compacted samples + 1; 0 = empty */
};

static bool mergeable(const struct fc_profile *p, const struct fc_sample *s)
{
    return s->n_ts == 0 && p->n_sample_types > 0 && s->n_values == p->n_sample_types;
}

static uint64_t sample_hash(const struct fc_batch *b, const struct fc_sample *s)
{
    uint64_t h = mix(((uint64_t)s->stack << 32) ^ s->link ^ ((uint64_t)s->attrs.n << 16));

    if (s->attrs.n > 0) {
        h ^= XXH3_64bits(fc_span_idx(b, s->attrs), s->attrs.n * sizeof(uint32_t));
    }
    return h;
}

uint64_t fc_fold_merge_equal(const struct fc_batch *b, struct fc_profile *p)
{
    uint32_t n = p->n_samples, out = 0, cap = 16;
    struct skey *tab;
    uint64_t merged = 0;

    while (cap < (uint64_t)n * 2) {
        cap *= 2;
    }
    tab = fc_xcalloc(cap, sizeof(*tab));
    for (uint32_t i = 0; i < n; i++) {
        struct fc_sample s = p->samples[i];
        bool done = false;
        if (mergeable(p, &s)) {
            uint64_t h = sample_hash(b, &s);
            uint32_t slot = (uint32_t)h & (cap - 1);
            for (; tab[slot].row != 0; slot = (slot + 1) & (cap - 1)) {
                struct fc_sample *d = &p->samples[tab[slot].row - 1];
                bool fits = true;
                if (tab[slot].h != h || d->stack != s.stack || d->link != s.link ||
                    !fc_span_eq(b, d->attrs, s.attrs)) {
                    continue;
                }
                for (uint32_t t = 0; t < s.n_values; t++) {
                    int64_t r;
                    fits = fits && !__builtin_add_overflow(p->nums[d->values_off + t],
                                                           p->nums[s.values_off + t], &r);
                }
                if (fits) {
                    for (uint32_t t = 0; t < s.n_values; t++) {
                        p->nums[d->values_off + t] += p->nums[s.values_off + t];
                    }
                    merged++;
                    done = true;
                }
                break;
            }
            if (!done && tab[slot].row == 0) {
                tab[slot].h = h;
                tab[slot].row = out + 1;
            }
        }
        if (!done) {
            p->samples[out++] = s;
        }
    }
    p->n_samples = out;
    free(tab);
    return merged;
}

int fc_fold_profile(struct fc_batch *b, uint32_t profile, const struct fc_fold_options *o,
                    struct fc_fold_stats *st, struct fc_error *err)
{
    struct fc_profile *p;
    struct tree t = {0};
    uint32_t n_stacks, drive, other = 0, *leaf = NULL, *new_stack = NULL, *buf = NULL;
    uint32_t buf_cap = 0;
    bool *kept = NULL;
    struct fc_fold_stats s = {0};
    int rc = FC_OK;

    if (st != NULL) {
        memset(st, 0, sizeof(*st));
    }
    if (profile >= b->n_profiles) {
        return fc_errorf(err, FC_EINVAL, "fold: no profile %u", profile);
    }
    if (!(o->min_fraction >= 0 && o->min_fraction <= 1)) {
        return fc_errorf(err, FC_EINVAL, "fold: min_fraction must be between 0 and 1");
    }
    p = &b->profiles[profile];
    n_stacks = b->dict.n_stacks;
    drive = fc_fold_drive_type(b, p, o->sample_type);

    /* The tree: node per (parent, location); leaf node per stack, memoised. */
    leaf = fc_xmalloc(((size_t)n_stacks + 1) * sizeof(*leaf));
    for (uint32_t i = 0; i < n_stacks; i++) {
        leaf[i] = NONE;
    }
    tree_add(&t, 0, 0);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *smp = &p->samples[i];
        uint32_t sid = smp->stack;
        if (sid >= n_stacks) {
            continue; /* not a stack of this dictionary: left as it is */
        }
        if (leaf[sid] == NONE) {
            struct fc_span sp = b->dict.stacks[sid].locations;
            const uint32_t *locs = fc_span_idx(b, sp);
            uint32_t cur = 0;
            for (uint32_t j = sp.n; j-- > 0;) {
                uint32_t nl =
                    locs[j] < b->dict.n_locations ? b->dict.locations[locs[j]].n_lines : 1;
                cur = tree_child(&t, cur, locs[j], nl);
            }
            leaf[sid] = cur;
        }
        t.w[leaf[sid]] = sat_addu(t.w[leaf[sid]], mag(fc_sample_value(p, smp, drive)));
    }
    /* Children are made after their parent: one backward pass sums weights upwards. */
    for (uint32_t i = t.n; i-- > 1;) {
        t.w[t.parent[i]] = sat_addu(t.w[t.parent[i]], t.w[i]);
    }
    for (uint32_t i = 1; i < t.n; i++) {
        s.nodes_before += t.frames[i];
    }
    kept = fc_xcalloc(t.n, sizeof(*kept));
    s.nodes_after = choose(&t, o, kept);

    /* New stacks: the deepest kept node's path under an `other` leaf. */
    new_stack = fc_xmalloc(((size_t)n_stacks + 1) * sizeof(*new_stack));
    for (uint32_t i = 0; i < n_stacks && rc == FC_OK; i++) {
        struct fc_span sp;
        uint32_t a, k;
        new_stack[i] = i;
        if (leaf[i] == NONE || kept[leaf[i]]) {
            continue;
        }
        if (other == 0) {
            rc = other_location(b, &other);
            if (rc != FC_OK) {
                break;
            }
        }
        for (a = leaf[i]; !kept[a]; a = t.parent[a]) {
        }
        k = t.depth[a];
        sp = b->dict.stacks[i].locations;
        if (k + 1 > buf_cap) {
            buf_cap = k + 1;
            buf = fc_xrealloc(buf, (size_t)buf_cap * sizeof(*buf));
        }
        buf[0] = other;
        /* Leaf first: the root-most k frames are the last k. */
        memcpy(buf + 1, fc_span_idx(b, sp) + (sp.n - k), (size_t)k * sizeof(*buf));
        rc = fc_dict_stack(b, buf, k + 1, &new_stack[i]);
    }
    if (rc == FC_OK) {
        for (uint32_t i = 0; i < p->n_samples; i++) {
            struct fc_sample *smp = &p->samples[i];
            if (smp->stack < n_stacks && new_stack[smp->stack] != smp->stack) {
                smp->stack = new_stack[smp->stack];
                s.samples_folded++;
            }
        }
        if (s.samples_folded > 0) {
            s.samples_merged = fc_fold_merge_equal(b, p);
        }
    }
    free(buf);
    free(new_stack);
    free(kept);
    free(leaf);
    tree_free(&t);
    if (rc != FC_OK) {
        return fc_errorf(err, rc, "fold: the batch exceeds its size limit");
    }
    if (st != NULL) {
        *st = s;
    }
    return FC_OK;
}
